//! People who sign in to the console (decisions §21, §24): a user belongs to one workspace, has a
//! role, and the role stands for a set of scopes, as a key's scopes do.

use crate::{
    text::{check_len, MAX_LINE},
    Email, Timestamp, UserId, ValidationError, WorkspaceId,
};

/// The longest password accepted: long enough for any passphrase, short enough that hashing one
/// is no way to make the server work hard.
pub const MAX_PASSWORD_LEN: usize = 1_024;
/// The shortest password accepted.
pub const MIN_PASSWORD_LEN: usize = 8;
/// How long a one-time sign-in link works.
pub const SIGN_IN_LINK_MS: i64 = 24 * 60 * 60 * 1000;

/// What a user may do. Each role is a fixed set of scopes ([`Role::grants`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Admin,
    Member,
    Viewer,
}

/// The scope resources a member does not hold: access and configuration of the workspace as a
/// whole (§21), and the audit log and erasure, which §25 gives to `*` and admins only.
const ADMIN_ONLY: [&str; 6] = ["keys", "settings", "connections", "users", "audit", "erase"];
/// The scope resources even a viewer's `:read` does not reach (§25: `*` and admins only).
const NOT_FOR_VIEWERS: [&str; 2] = ["audit", "erase"];

impl Role {
    pub const ALL: [Role; 3] = [Role::Admin, Role::Member, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Member => "member",
            Role::Viewer => "viewer",
        }
    }

    pub fn parse(value: &str) -> Result<Role, ValidationError> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == value)
            .ok_or_else(|| ValidationError::UnknownValue {
                field: "role".into(),
                value: value.to_owned(),
                valid_options: Role::ALL.iter().map(|r| r.as_str().to_owned()).collect(),
            })
    }

    /// Whether the role holds `<resource>:write` (`write`) or `<resource>:read` on `resource`:
    /// an admin everything, a member reads and writes all but [`ADMIN_ONLY`], a viewer reads
    /// all but the audit log.
    pub fn grants(self, resource: &str, write: bool) -> bool {
        match self {
            Role::Admin => true,
            Role::Member => !ADMIN_ONLY.contains(&resource),
            Role::Viewer => !write && !NOT_FOR_VIEWERS.contains(&resource),
        }
    }

    /// The role's scopes over `resources`, as a key would hold them: `*` for an admin, else one
    /// `<resource>:write` or `<resource>:read` per resource it reaches.
    pub fn scopes(self, resources: &[&str]) -> Vec<String> {
        if self == Role::Admin {
            return vec!["*".to_owned()];
        }
        resources
            .iter()
            .filter_map(|r| {
                if self.grants(r, true) {
                    Some(format!("{r}:write"))
                } else if self.grants(r, false) {
                    Some(format!("{r}:read"))
                } else {
                    None
                }
            })
            .collect()
    }
}

/// A user as stored. The password is kept as its Argon2id hash only, and never leaves the store
/// but for a sign-in's check.
#[derive(Clone, PartialEq)]
pub struct User {
    pub id: UserId,
    pub workspace_id: WorkspaceId,
    pub email: Email,
    pub name: String,
    pub role: Role,
    /// PHC string of the Argon2id hash; `None` until the user sets a password with a link.
    pub password_hash: Option<String>,
    pub created_at: Timestamp,
    pub last_login_at: Option<Timestamp>,
}

impl std::fmt::Debug for User {
    // The hash is not the password, but an offline guess starts from it: keep it out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("id", &self.id)
            .field("email", &self.email)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

/// A user's email, normalised as contacts' are, so that one address signs in however it is
/// spelled.
pub fn check_email(raw: &str) -> Result<Email, ValidationError> {
    check_len("email", raw, MAX_LINE)?;
    Email::parse(raw).ok_or_else(|| {
        ValidationError::invalid("email", "email must be an address such as kate@example.com")
    })
}

/// A user's display name: trimmed, not empty, one line of at most [`MAX_LINE`] characters.
pub fn check_name(raw: &str) -> Result<String, ValidationError> {
    let name = raw.trim();
    if name.is_empty() {
        return Err(ValidationError::invalid("name", "name is required"));
    }
    check_len("name", name, MAX_LINE)?;
    if name.chars().any(char::is_control) {
        return Err(ValidationError::invalid(
            "name",
            "name must be one line without control characters",
        ));
    }
    Ok(name.to_owned())
}

/// A new password: [`MIN_PASSWORD_LEN`] to [`MAX_PASSWORD_LEN`] characters.
pub fn check_password(raw: &str) -> Result<(), ValidationError> {
    let len = raw.chars().count();
    if len < MIN_PASSWORD_LEN {
        return Err(ValidationError::invalid(
            "password",
            format!("password must be at least {MIN_PASSWORD_LEN} characters"),
        ));
    }
    if len > MAX_PASSWORD_LEN {
        return Err(ValidationError::invalid(
            "password",
            format!("password is at most {MAX_PASSWORD_LEN} characters"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RESOURCES: [&str; 8] = [
        "contacts",
        "deals",
        "keys",
        "settings",
        "connections",
        "users",
        "audit",
        "erase",
    ];

    #[test]
    fn roles_map_to_the_scopes_of_decisions_21() {
        assert_eq!(Role::Admin.scopes(&RESOURCES), vec!["*"]);
        assert_eq!(
            Role::Member.scopes(&RESOURCES),
            vec!["contacts:write", "deals:write"]
        );
        assert_eq!(
            Role::Viewer.scopes(&RESOURCES),
            vec![
                "contacts:read",
                "deals:read",
                "keys:read",
                "settings:read",
                "connections:read",
                "users:read"
            ]
        );
    }

    #[test]
    fn roles_parse_by_name_only() {
        for r in Role::ALL {
            assert_eq!(Role::parse(r.as_str()).unwrap(), r);
        }
        match Role::parse("owner") {
            Err(ValidationError::UnknownValue { valid_options, .. }) => {
                assert_eq!(valid_options, vec!["admin", "member", "viewer"])
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn names_emails_and_passwords_are_checked() {
        assert_eq!(check_name("  Kate ").unwrap(), "Kate");
        assert!(check_name("   ").is_err());
        assert!(check_name("a\nb").is_err());
        assert!(check_name(&"x".repeat(MAX_LINE + 1)).is_err());
        assert_eq!(
            check_email(" Kate@Example.COM").unwrap().as_str(),
            "kate@example.com"
        );
        assert!(check_email("kate").is_err());
        assert!(check_password("short").is_err());
        assert!(check_password("long enough").is_ok());
        assert!(check_password(&"p".repeat(MAX_PASSWORD_LEN + 1)).is_err());
    }
}
