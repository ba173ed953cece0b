//! The automation capability catalog: which events trigger rules, which condition operators exist
//! (and what operand each takes), and which actions a rule may run with their parameters (spec,
//! "Automation"; decisions §3 and §12). `GET /automations-capabilities` and `GET /schema` publish
//! exactly these lists, and the automation engine validates rules against them, so what clients
//! are told and what the server accepts come from one place.

use crate::event::EventType;

/// Events that trigger automations and sequences. Company changes are not triggers.
pub const TRIGGER_EVENTS: [EventType; 5] = EventType::ALL;

/// What a condition operator compares the field with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operand {
    /// No `value` (`exists`, `empty`).
    None,
    /// One string, number or boolean.
    Scalar,
    /// An array of strings, numbers or booleans.
    List,
    /// A number, or a date or timestamp (compared in time order).
    Ordered,
}

impl Operand {
    pub fn as_str(self) -> &'static str {
        match self {
            Operand::None => "none",
            Operand::Scalar => "scalar",
            Operand::List => "array",
            Operand::Ordered => "number_or_date",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionOp {
    Eq,
    Neq,
    In,
    Nin,
    Exists,
    Empty,
    Contains,
    Gt,
    Lt,
    Gte,
    Lte,
}

impl ConditionOp {
    pub const ALL: [ConditionOp; 11] = [
        ConditionOp::Eq,
        ConditionOp::Neq,
        ConditionOp::In,
        ConditionOp::Nin,
        ConditionOp::Exists,
        ConditionOp::Empty,
        ConditionOp::Contains,
        ConditionOp::Gt,
        ConditionOp::Lt,
        ConditionOp::Gte,
        ConditionOp::Lte,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ConditionOp::Eq => "eq",
            ConditionOp::Neq => "neq",
            ConditionOp::In => "in",
            ConditionOp::Nin => "nin",
            ConditionOp::Exists => "exists",
            ConditionOp::Empty => "empty",
            ConditionOp::Contains => "contains",
            ConditionOp::Gt => "gt",
            ConditionOp::Lt => "lt",
            ConditionOp::Gte => "gte",
            ConditionOp::Lte => "lte",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == s)
    }

    pub fn operand(self) -> Operand {
        match self {
            ConditionOp::Exists | ConditionOp::Empty => Operand::None,
            ConditionOp::Eq | ConditionOp::Neq | ConditionOp::Contains => Operand::Scalar,
            ConditionOp::In | ConditionOp::Nin => Operand::List,
            ConditionOp::Gt | ConditionOp::Lt | ConditionOp::Gte | ConditionOp::Lte => {
                Operand::Ordered
            }
        }
    }

    /// `exists` and `empty` take no value (spec, "Automation").
    pub fn takes_value(self) -> bool {
        self.operand() != Operand::None
    }

    pub fn description(self) -> &'static str {
        match self {
            ConditionOp::Eq => "the field equals the value",
            ConditionOp::Neq => "the field does not equal the value",
            ConditionOp::In => "the field equals one of the values (use it for OR on one field)",
            ConditionOp::Nin => "the field equals none of the values",
            ConditionOp::Exists => "the field is set (not null); takes no value",
            ConditionOp::Empty => {
                "the field is null, an empty string or an empty array; takes no value"
            }
            ConditionOp::Contains => {
                "substring of a string field, or member of an array field (multiselect)"
            }
            ConditionOp::Gt => "greater than the value (numbers, or dates in time order)",
            ConditionOp::Lt => "less than the value (numbers, or dates in time order)",
            ConditionOp::Gte => {
                "greater than or equal to the value (numbers, or dates in time order)"
            }
            ConditionOp::Lte => "less than or equal to the value (numbers, or dates in time order)",
        }
    }
}

/// What a condition's `field` may name (decisions §12).
pub const CONDITION_FIELDS: &str = "a built-in field of the triggering record (for deals these include `stage`, `pipeline` and \
    `value_cents`), a custom field key (bare or as `custom_fields.<key>`), or `previous_stage` on `deal.stage_changed`";

/// How action text is filled in (spec, "Automation").
pub const PLACEHOLDERS: &str =
    "`{{field}}` placeholders in action text are filled from the triggering record and its custom \
    fields; an unknown placeholder renders empty";

/// The JSON type a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParamType {
    String,
    /// Any JSON value the target field accepts.
    Any,
}

impl ParamType {
    pub fn as_str(self) -> &'static str {
        match self {
            ParamType::String => "string",
            ParamType::Any => "any",
        }
    }
}

/// Whether an action must carry a parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Need {
    Required,
    Optional,
    /// Required unless the named parameter is given instead (`subject` and `body` of
    /// `send_email` may be replaced by `template_id`, decisions §3).
    RequiredWithout(&'static str),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ActionParam {
    pub name: &'static str,
    pub param_type: ParamType,
    pub need: Need,
    pub description: &'static str,
}

const fn param(
    name: &'static str,
    param_type: ParamType,
    need: Need,
    description: &'static str,
) -> ActionParam {
    ActionParam {
        name,
        param_type,
        need,
        description,
    }
}

const CREATE_ACTIVITY: &[ActionParam] = &[
    param(
        "activity_type",
        ParamType::String,
        Need::Required,
        "a value of the `activity.type` enum group (note, call, email, task, ...)",
    ),
    param(
        "body",
        ParamType::String,
        Need::Required,
        "the activity text; placeholders allowed",
    ),
];

const SET_FIELD: &[ActionParam] = &[
    param(
        "field",
        ParamType::String,
        Need::Required,
        "a built-in field of the triggering record, or a registered custom field key",
    ),
    param(
        "value",
        ParamType::Any,
        Need::Required,
        "the new value, validated like a client's write of that field",
    ),
];

const MOVE_DEAL_STAGE: &[ActionParam] = &[param(
    "stage",
    ParamType::String,
    Need::Required,
    "a stage key that exists in the deal's pipeline",
)];

const SEND_EMAIL: &[ActionParam] = &[
    param(
        "to",
        ParamType::String,
        Need::Optional,
        "recipient address; default the triggering contact, or the deal's primary contact",
    ),
    param(
        "subject",
        ParamType::String,
        Need::RequiredWithout("template_id"),
        "the subject; placeholders allowed",
    ),
    param(
        "body",
        ParamType::String,
        Need::RequiredWithout("template_id"),
        "the HTML body; placeholders allowed",
    ),
    param(
        "text",
        ParamType::String,
        Need::Optional,
        "a plain-text part; derived from `body` when absent",
    ),
    param(
        "template_id",
        ParamType::String,
        Need::Optional,
        "a `tpl_` template supplying subject, body and text instead",
    ),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionType {
    CreateActivity,
    SetField,
    MoveDealStage,
    SendEmail,
}

impl ActionType {
    pub const ALL: [ActionType; 4] = [
        ActionType::CreateActivity,
        ActionType::SetField,
        ActionType::MoveDealStage,
        ActionType::SendEmail,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ActionType::CreateActivity => "create_activity",
            ActionType::SetField => "set_field",
            ActionType::MoveDealStage => "move_deal_stage",
            ActionType::SendEmail => "send_email",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.as_str() == s)
    }

    pub fn params(self) -> &'static [ActionParam] {
        match self {
            ActionType::CreateActivity => CREATE_ACTIVITY,
            ActionType::SetField => SET_FIELD,
            ActionType::MoveDealStage => MOVE_DEAL_STAGE,
            ActionType::SendEmail => SEND_EMAIL,
        }
    }

    /// Whether the action acts on a deal, so that only deal events may trigger it.
    pub fn deal_only(self) -> bool {
        matches!(self, ActionType::MoveDealStage)
    }

    /// The trigger events a rule with this action may have.
    pub fn trigger_events(self) -> Vec<EventType> {
        TRIGGER_EVENTS
            .into_iter()
            .filter(|e| !self.deal_only() || e.object() == "deal")
            .collect()
    }

    pub fn description(self) -> &'static str {
        match self {
            ActionType::CreateActivity => "logs an activity on the triggering contact or deal",
            ActionType::SetField => "sets a field of the triggering record (no event is emitted)",
            ActionType::MoveDealStage => {
                "moves the triggering deal to another stage of its pipeline (no event is emitted)"
            }
            ActionType::SendEmail => {
                "sends an email through the workspace's email connection; simulated in test mode"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_is_the_spec_s() {
        let events: Vec<_> = TRIGGER_EVENTS.iter().map(|e| e.as_str()).collect();
        assert_eq!(
            events,
            [
                "contact.created",
                "contact.updated",
                "deal.created",
                "deal.updated",
                "deal.stage_changed"
            ]
        );
        let ops: Vec<_> = ConditionOp::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(
            ops,
            ["eq", "neq", "in", "nin", "exists", "empty", "contains", "gt", "lt", "gte", "lte"]
        );
        let actions: Vec<_> = ActionType::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            actions,
            [
                "create_activity",
                "set_field",
                "move_deal_stage",
                "send_email"
            ]
        );
    }

    #[test]
    fn names_parse_back() {
        for op in ConditionOp::ALL {
            assert_eq!(ConditionOp::parse(op.as_str()), Some(op));
        }
        for a in ActionType::ALL {
            assert_eq!(ActionType::parse(a.as_str()), Some(a));
        }
        assert_eq!(ConditionOp::parse("EQ"), None);
        assert_eq!(ActionType::parse("webhook"), None);
    }

    #[test]
    fn only_exists_and_empty_take_no_value() {
        let valueless: Vec<_> = ConditionOp::ALL
            .into_iter()
            .filter(|o| !o.takes_value())
            .collect();
        assert_eq!(valueless, [ConditionOp::Exists, ConditionOp::Empty]);
        assert_eq!(ConditionOp::In.operand(), Operand::List);
        assert_eq!(ConditionOp::Gte.operand(), Operand::Ordered);
    }

    #[test]
    fn action_parameters_are_the_spec_s() {
        let names = |a: ActionType| a.params().iter().map(|p| p.name).collect::<Vec<_>>();
        assert_eq!(names(ActionType::CreateActivity), ["activity_type", "body"]);
        assert_eq!(names(ActionType::SetField), ["field", "value"]);
        assert_eq!(names(ActionType::MoveDealStage), ["stage"]);
        assert_eq!(
            names(ActionType::SendEmail),
            ["to", "subject", "body", "text", "template_id"]
        );
        let subject = ActionType::SendEmail.params()[1];
        assert_eq!(subject.need, Need::RequiredWithout("template_id"));
    }

    #[test]
    fn move_deal_stage_is_for_deal_events_only() {
        assert!(ActionType::MoveDealStage
            .trigger_events()
            .iter()
            .all(|e| e.object() == "deal"));
        assert_eq!(ActionType::MoveDealStage.trigger_events().len(), 3);
        assert_eq!(ActionType::SendEmail.trigger_events().len(), 5);
    }
}
