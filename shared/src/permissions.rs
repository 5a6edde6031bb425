//! The break-glass permissions. The first four names are contracts kept from the reference
//! system; `tower.breakglass.audit` is this system's own, for auditors without any other right.

use serde::{Deserialize, Serialize};

/// One permission, granted per environment to users or groups in the server config. Its
/// contract name is the same for serde (JSON, OpenAPI) and strum (config, messages); a test
/// holds the two together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
#[derive(strum::IntoStaticStr, strum::EnumString, strum::Display)]
pub enum Permission {
    /// Ask for a session.
    #[serde(rename = "tower.breakglass.request")]
    #[strum(serialize = "tower.breakglass.request")]
    Request,
    /// Approve or deny someone else's request.
    #[serde(rename = "tower.breakglass.approve")]
    #[strum(serialize = "tower.breakglass.approve")]
    Approve,
    /// End anyone's session.
    #[serde(rename = "tower.breakglass.terminate")]
    #[strum(serialize = "tower.breakglass.terminate")]
    Terminate,
    /// Break the glass: activate a Flight session without a second person.
    #[serde(rename = "tower.breakglass.self")]
    #[strum(serialize = "tower.breakglass.self")]
    SelfApprove,
    /// Read the environment's sessions and export their audit trail (`GET /export`), without
    /// any right to act on them.
    #[serde(rename = "tower.breakglass.audit")]
    #[strum(serialize = "tower.breakglass.audit")]
    Audit,
}

impl Permission {
    /// Every permission, in a stable order.
    pub const ALL: [Permission; 5] = [
        Permission::Request,
        Permission::Approve,
        Permission::Terminate,
        Permission::SelfApprove,
        Permission::Audit,
    ];

    /// The contract name, e.g. `tower.breakglass.approve`.
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// Parses a contract name.
    pub fn from_name(name: &str) -> Option<Permission> {
        name.parse().ok()
    }
}

/// The permissions one user holds in one environment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(utoipa::ToSchema))]
pub struct PermissionSet {
    /// `tower.breakglass.request`
    pub request: bool,
    /// `tower.breakglass.approve`
    pub approve: bool,
    /// `tower.breakglass.terminate`
    pub terminate: bool,
    /// `tower.breakglass.self`
    #[serde(rename = "self")]
    pub self_approve: bool,
    /// `tower.breakglass.audit`
    #[serde(default)]
    pub audit: bool,
}

impl PermissionSet {
    /// No permission at all.
    pub const NONE: PermissionSet = PermissionSet {
        request: false,
        approve: false,
        terminate: false,
        self_approve: false,
        audit: false,
    };

    /// Every permission.
    pub const ALL: PermissionSet = PermissionSet {
        request: true,
        approve: true,
        terminate: true,
        self_approve: true,
        audit: true,
    };

    /// Whether `p` is held.
    pub fn has(&self, p: Permission) -> bool {
        match p {
            Permission::Request => self.request,
            Permission::Approve => self.approve,
            Permission::Terminate => self.terminate,
            Permission::SelfApprove => self.self_approve,
            Permission::Audit => self.audit,
        }
    }

    /// Adds `p`.
    pub fn grant(&mut self, p: Permission) {
        match p {
            Permission::Request => self.request = true,
            Permission::Approve => self.approve = true,
            Permission::Terminate => self.terminate = true,
            Permission::SelfApprove => self.self_approve = true,
            Permission::Audit => self.audit = true,
        }
    }

    /// Whether any permission is held: what lets a user see an environment and its sessions at
    /// all (elsewhere they answer "not found", as if they did not exist).
    pub fn any(&self) -> bool {
        *self != PermissionSet::NONE
    }

    /// The held permissions, in a stable order.
    pub fn list(&self) -> Vec<Permission> {
        Permission::ALL
            .into_iter()
            .filter(|p| self.has(*p))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_the_contract() {
        for p in Permission::ALL {
            assert_eq!(Permission::from_name(p.name()), Some(p));
            let json = serde_json::to_string(&p).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", p.name()));
        }
        assert_eq!(Permission::from_name("tower.breakglass.exec"), None);
    }

    #[test]
    fn grant_and_has_agree() {
        for p in Permission::ALL {
            let mut s = PermissionSet::NONE;
            s.grant(p);
            assert_eq!(s.list(), vec![p]);
        }
        assert_eq!(PermissionSet::ALL.list().len(), 5);
    }
}
