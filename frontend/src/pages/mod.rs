//! One module per route (the shell, `app.rs`, holds the route table).

mod account;
pub mod chunks;
mod deliveries;
mod environment;
mod home;
mod not_found;
mod ops_wall;
mod pod;
mod recording;
mod search;
mod session;

pub use account::AccountPage;
pub use deliveries::DeliveriesPage;
pub use environment::EnvironmentPage;
pub use home::Home;
pub use not_found::NotFound;
pub use ops_wall::OpsWall;
pub use pod::PodPage;
pub use recording::RecordingPage;
pub use search::SearchPage;
pub use session::SessionPage;
