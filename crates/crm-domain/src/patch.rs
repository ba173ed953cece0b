//! A field of a partial update: left alone, cleared with `null`, or set.

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Patch<T> {
    #[default]
    Absent,
    Null,
    Value(T),
}

impl<T> Patch<T> {
    pub fn is_absent(&self) -> bool {
        matches!(self, Patch::Absent)
    }

    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Patch<U> {
        match self {
            Patch::Absent => Patch::Absent,
            Patch::Null => Patch::Null,
            Patch::Value(v) => Patch::Value(f(v)),
        }
    }

    pub fn try_map<U, E>(self, f: impl FnOnce(T) -> Result<U, E>) -> Result<Patch<U>, E> {
        Ok(match self {
            Patch::Absent => Patch::Absent,
            Patch::Null => Patch::Null,
            Patch::Value(v) => Patch::Value(f(v)?),
        })
    }

    /// Applies the patch to an optional field; returns whether the value changed.
    pub fn apply_to(self, slot: &mut Option<T>) -> bool
    where
        T: PartialEq,
    {
        let next = match self {
            Patch::Absent => return false,
            Patch::Null => None,
            Patch::Value(v) => Some(v),
        };
        let changed = *slot != next;
        *slot = next;
        changed
    }
}
