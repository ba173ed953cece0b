//! Why a record or a value was refused. Each variant maps to one code of the spec's error table;
//! the mapping to HTTP statuses lives with the problem documents in `crm-api`.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// A contact without any name, identifier, company or custom field.
    #[error("a contact needs at least one of first_name, last_name, email, phone, linkedin_url, company_id or a custom field")]
    IdentifierRequired,
    /// Well-formed input that breaks a rule of the field.
    #[error("{field}: {detail}")]
    Invalid { field: String, detail: String },
    /// A field name that is not part of the object, or a custom field key that is not registered.
    #[error("unknown field `{field}`")]
    UnknownField {
        field: String,
        valid_options: Vec<String>,
        suggestion: Option<String>,
    },
    /// A value outside a registered set (enum group, stage keys, event types, ...).
    #[error("`{value}` is not a valid value for {field}")]
    UnknownValue {
        field: String,
        value: String,
        valid_options: Vec<String>,
    },
    /// An id that cannot name any record of the kind the field expects.
    #[error("{field}: `{value}` does not refer to an existing record")]
    InvalidReference { field: String, value: String },
}

impl ValidationError {
    pub fn invalid(field: impl Into<String>, detail: impl Into<String>) -> Self {
        ValidationError::Invalid {
            field: field.into(),
            detail: detail.into(),
        }
    }
}
