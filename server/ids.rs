//! The ids of briefs, trials, people, teams, tokens, evidence, approvals, commitments, prices and
//! webhooks as their own types, so a function that takes a brief id and a trial id cannot be called
//! with them swapped. A bare `Uuid` stays where it names any record (audit entries, outbox events
//! and their deliveries) and for ids that never leave their module (a ledger import, a price sheet,
//! a sign-in attempt). Each is a UUID in every outward form: serde reads and writes the bare UUID
//! string, sqlx stores it in a `uuid` column, `Display` and `FromStr` are the UUID's, and its
//! OpenAPI schema is the UUID's (`string`, format `uuid`).
//!
//! In a `sqlx::query!` statement a non-null column reads straight into one (the macros convert with
//! `From<Uuid>`); a nullable one names the type (`trial_id AS "trial_id: TrialId"`). A bind passes
//! `id.as_uuid()`, so the macro still checks the column is a `uuid`; a slice of ids passes `ids as _`
//! (the newtype's own `sqlx::Type`, an array of `uuid`).
//!
//! A field of an answer that derives `utoipa::ToSchema` says `#[schema(value_type = Uuid)]`: the
//! derive inlines only the types it knows (a `Uuid` among them) and would otherwise refer to a
//! separate `BriefId` schema, a change to the published document.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};
use utoipa::openapi::{
    schema::{KnownFormat, ObjectBuilder, Schema, SchemaFormat, SchemaType, Type},
    RefOr,
};
use uuid::Uuid;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type)]
        #[serde(transparent)]
        #[sqlx(transparent)]
        pub struct $name(Uuid);

        impl $name {
            /// The id for a UUID read from outside (a path, a stored row, a test).
            pub const fn from_uuid(id: Uuid) -> Self {
                Self(id)
            }

            /// The bare UUID, for code that names any record (audit entries, outbox events).
            pub const fn as_uuid(self) -> Uuid {
                self.0
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }

        impl FromStr for $name {
            type Err = uuid::Error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Uuid::from_str(s).map(Self)
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                uuid_schema()
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

uuid_id!(
    /// A brief's id (`briefs.id`).
    BriefId
);
uuid_id!(
    /// A trial's id (`trials.id`).
    TrialId
);
uuid_id!(
    /// A person's id (`users.id`).
    UserId
);
uuid_id!(
    /// A team's id (`teams.id`).
    TeamId
);
uuid_id!(
    /// A token's id, its JWT `jti` (`api_tokens.jti`).
    TokenId
);
uuid_id!(
    /// An evidence file's id (`evidence.id`).
    EvidenceId
);
uuid_id!(
    /// An approval's or rejection's id (`approvals.id`).
    ApprovalId
);
uuid_id!(
    /// A commitment's id (`commitments.id`).
    CommitmentId
);
uuid_id!(
    /// A price row's id (`prices.id`).
    PriceId
);
uuid_id!(
    /// A webhook's id (`webhooks.id`).
    WebhookId
);

/// The schema utoipa gives a `Uuid`: a string of format `uuid`.
fn uuid_schema() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::new(Type::String))
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)))
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "0190f5c2-0000-7000-8000-000000000001";

    #[test]
    fn serde_reads_and_writes_the_bare_uuid_string() {
        let id: BriefId = TEXT.parse().unwrap();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, format!("\"{TEXT}\""));
        assert_eq!(serde_json::from_str::<BriefId>(&json).unwrap(), id);
        let trial: TrialId = serde_json::from_str(&json).unwrap();
        assert_eq!(trial.as_uuid(), id.as_uuid());
    }

    #[test]
    fn display_and_from_str_are_the_uuids() {
        let uuid = Uuid::parse_str(TEXT).unwrap();
        let id = TrialId::from(uuid);
        assert_eq!(id.to_string(), uuid.to_string());
        assert_eq!(id.to_string().parse::<TrialId>().unwrap(), id);
        assert_eq!(Uuid::from(id), uuid);
    }

    #[test]
    fn a_bad_string_is_refused() {
        assert!("not-a-uuid".parse::<BriefId>().is_err());
        assert!("".parse::<TrialId>().is_err());
        assert!(serde_json::from_str::<BriefId>("\"0190f5c2-0000\"").is_err());
        assert!(serde_json::from_str::<TrialId>("42").is_err());
    }

    #[test]
    fn the_schema_is_a_uuid_string() {
        let schema = serde_json::to_value(<BriefId as utoipa::PartialSchema>::schema()).unwrap();
        assert_eq!(schema, serde_json::json!({"type": "string", "format": "uuid"}));
    }
}
