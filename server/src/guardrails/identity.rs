//! The server's username on a cluster and the RBAC subject it stands for: Kubernetes names a
//! service account `system:serviceaccount:<namespace>:<name>`, and binds it as a
//! `ServiceAccount` subject; every other username is bound as a `User`.

use breakglass_shared::validate;

use super::input::RenderError;

/// What Kubernetes puts before `<namespace>:<name>` in a service account's username.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// A username, read as the RBAC subject that grants to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity<'a> {
    /// `system:serviceaccount:<namespace>:<name>`.
    ServiceAccount {
        /// The service account's namespace.
        namespace: &'a str,
        /// Its name (everything after the namespace).
        name: &'a str,
    },
    /// Any other username (a token, certificate or authenticator user); also a username that
    /// starts like a service account's but lacks the name, as RBAC would not match it as one.
    User(&'a str),
}

impl<'a> Identity<'a> {
    /// Reads `username`; never fails (see [`Identity::check`] for what the policies accept).
    pub fn parse(username: &'a str) -> Identity<'a> {
        match username
            .strip_prefix(SERVICE_ACCOUNT_PREFIX)
            .and_then(|rest| rest.split_once(':'))
        {
            Some((namespace, name)) => Identity::ServiceAccount { namespace, name },
            None => Identity::User(username),
        }
    }

    /// Reads `username` for the policies, which write it into CEL string literals and YAML:
    /// only the characters usernames of machine identities use (nothing that needs quoting),
    /// and a service account username must name a valid namespace and a name.
    pub fn check(username: &'a str) -> Result<Identity<'a>, RenderError> {
        let bad = |reason: &str| {
            Err(RenderError::Identity {
                identity: username.to_string(),
                reason: reason.to_string(),
            })
        };
        if username.is_empty() || username.len() > 253 {
            return bad("must be 1 to 253 characters");
        }
        if !username
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ":._@+/=-".contains(c))
        {
            return bad("may contain only letters, digits and : . _ @ + / = -");
        }
        let identity = Identity::parse(username);
        let well_formed = match identity {
            Identity::ServiceAccount { namespace, name } => {
                validate::dns_label("namespace", namespace).is_ok()
                    && !name.is_empty()
                    && !name.contains(':')
            }
            Identity::User(_) => !username.starts_with(SERVICE_ACCOUNT_PREFIX),
        };
        if !well_formed {
            return bad("a service account username is system:serviceaccount:<namespace>:<name>");
        }
        Ok(identity)
    }

    /// The `subjects` list of a binding to this identity (RBAC's JSON shape).
    pub fn rbac_subjects(&self) -> serde_json::Value {
        match *self {
            Identity::ServiceAccount { namespace, name } => {
                serde_json::json!([{ "kind": "ServiceAccount", "name": name, "namespace": namespace }])
            }
            Identity::User(name) => serde_json::json!([{
                "kind": "User",
                "apiGroup": "rbac.authorization.k8s.io",
                "name": name
            }]),
        }
    }

    /// A CEL condition on a binding subject `s` that holds when `s` is this identity (the
    /// admission policies use it to recognise grants to the server). The identity must have
    /// passed [`Identity::check`], which makes it safe inside a CEL string literal.
    pub fn cel_is_subject(&self) -> String {
        match *self {
            Identity::ServiceAccount { namespace, name } => format!(
                "s.kind == 'ServiceAccount' && s.name == {} && s.?namespace.orValue('') == {}",
                cel_string(name),
                cel_string(namespace)
            ),
            Identity::User(name) => format!(
                "s.kind == 'User' && s.?apiGroup.orValue('') == 'rbac.authorization.k8s.io' && s.name == {}",
                cel_string(name)
            ),
        }
    }
}

/// `'text'` (the inputs are checked to need no escaping).
pub(super) fn cel_string(s: &str) -> String {
    format!("'{s}'")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn service_accounts_and_users_are_told_apart() {
        assert_eq!(
            Identity::parse("system:serviceaccount:breakglass:breakglass-server"),
            Identity::ServiceAccount {
                namespace: "breakglass",
                name: "breakglass-server"
            }
        );
        assert_eq!(
            Identity::parse("hangar:home:tower-actor"),
            Identity::User("hangar:home:tower-actor")
        );
        // Without a name it is no service account to RBAC; the policies refuse it.
        assert_eq!(
            Identity::parse("system:serviceaccount:onlyns"),
            Identity::User("system:serviceaccount:onlyns")
        );
        assert!(Identity::check("system:serviceaccount:onlyns").is_err());
        assert!(Identity::check("system:serviceaccount:ns:a:b").is_err());
        assert!(Identity::check("system:serviceaccount:ns:").is_err());
        assert_eq!(
            Identity::check("system:serviceaccount:ns:sa").unwrap(),
            Identity::ServiceAccount {
                namespace: "ns",
                name: "sa"
            }
        );
    }
}
