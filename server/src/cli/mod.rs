//! Command-line tools of `breakglass-server` besides serving.

pub mod doctor;
pub mod logins;
pub mod policies;
pub mod recordings;
