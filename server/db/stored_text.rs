//! An enumeration kept in a `text` column (with a CHECK listing its spellings), read and written by
//! sqlx itself: a statement names the column's type (`workload_kind AS "workload_kind: StoredText<WorkloadKind>"`)
//! and the row holds the value, so no reader decodes the text by hand.
//!
//! Why a wrapper and not `impl sqlx::Type for WorkloadKind`: most of these types live in the
//! `engine` crate, which must not depend on sqlx, and the orphan rule forbids implementing sqlx's
//! traits (foreign) for the engine's types (foreign too) here. A wrapper of our own may implement
//! them for any `TextEnum`; the server's own `text_enum!` types go through it as well, so every
//! stored enumeration is read one way.

use std::any::type_name;

use sqlx::{
    encode::IsNull,
    error::BoxDynError,
    postgres::{PgArgumentBuffer, PgTypeInfo, PgValueRef},
    Decode, Encode, Postgres, Type,
};

use crate::validation::TextEnum;

/// A `T` as its `text` column holds it: decoded with `FromStr` (a value no variant spells is a
/// decode error naming it, never a default) and encoded as the variant's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredText<T>(pub T);

impl<T> StoredText<T> {
    /// The value the column held.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl<T> Type<Postgres> for StoredText<T> {
    fn type_info() -> PgTypeInfo {
        <&str as Type<Postgres>>::type_info()
    }

    fn compatible(ty: &PgTypeInfo) -> bool {
        <&str as Type<Postgres>>::compatible(ty)
    }
}

impl<'r, T: TextEnum> Decode<'r, Postgres> for StoredText<T> {
    fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
        let text = <&str as Decode<Postgres>>::decode(value)?;
        text.parse().map(StoredText).map_err(|_| unknown::<T>(text).into())
    }
}

impl<T: TextEnum> Encode<'_, Postgres> for StoredText<T> {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        <&str as Encode<Postgres>>::encode(self.0.text(), buf)
    }
}

/// What a stored value no variant spells is told: the value, the type and the spellings it knows.
fn unknown<T: TextEnum>(text: &str) -> String {
    let name = type_name::<T>().rsplit("::").next().unwrap_or_default();
    let known: Vec<&str> = T::variants().iter().map(|v| v.text()).collect();
    format!("{text:?} is no {name} (one of: {})", known.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        briefs::model::{AllocationBoundary, CostUnit, DataBoundary},
        ledger::model::Category,
        review::decision::Verdict,
        sizing::{Precision, WorkloadKind},
        trials::model::{Billing, TrialStatus},
    };

    #[test]
    fn an_unknown_value_is_named_with_the_spellings_known() {
        assert_eq!(
            unknown::<Verdict>("hold"),
            r#""hold" is no Verdict (one of: expand, reserve, dedicate, scale, stop)"#
        );
        assert!(unknown::<TrialStatus>("").starts_with(r#""" is no TrialStatus"#));
    }

    /// Every stored enumeration's spellings differ from each other (`FromStr` finds the first).
    #[test]
    fn each_spelling_reads_back_as_its_variant() {
        fn check<T: TextEnum + PartialEq + std::fmt::Debug>() {
            for &v in T::variants() {
                assert_eq!(v.text().parse::<T>().ok(), Some(v), "{}", v.text());
            }
        }
        check::<WorkloadKind>();
        check::<Precision>();
        check::<DataBoundary>();
        check::<CostUnit>();
        check::<AllocationBoundary>();
        check::<Billing>();
        check::<TrialStatus>();
        check::<Verdict>();
        check::<Category>();
    }
}
