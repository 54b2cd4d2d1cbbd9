//! Who is asking: people with a server-side session, machines with a bearer token (JWT), and what
//! each role may do: engineers write briefs, cards, trials and tokens; managers also approve and
//! import prices; admins also manage people and teams; agent tokens only send evidence and ledger
//! lines to one brief (docs/reference.md "Accounts, roles and tokens", docs/security.md).

pub mod lockout;
pub mod password;
pub mod session;
pub mod teams;
pub mod token;
pub mod token_cache;
pub mod users;

use serde::{Deserialize, Serialize};

use crate::{
    error::AppError,
    ids::{BriefId, TokenId, TrialId, UserId},
};

/// Roles, weakest first. People are engineers, managers or admins; a manager may do what an
/// engineer may, an admin what a manager may. Agents only send evidence and ledger lines.
///
/// Stored as text (`users.role`, `api_tokens.role`) and decoded by sqlx: a stored value that is no
/// role is an error, never a default role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum Role {
    Agent,
    Engineer,
    Manager,
    Admin,
}

impl Role {
    pub const PEOPLE: [Role; 3] = [Role::Engineer, Role::Manager, Role::Admin];

    pub fn as_str(&self) -> &'static str {
        match self {
            Role::Agent => "agent",
            Role::Engineer => "engineer",
            Role::Manager => "manager",
            Role::Admin => "admin",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        [Role::Agent, Role::Engineer, Role::Manager, Role::Admin]
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or(())
    }
}

/// An authenticated caller.
#[derive(Debug, Clone)]
pub enum Principal {
    /// A person signed in through the browser.
    User { id: UserId, email: String, role: Role },
    /// A bearer token; `brief` limits it to one brief, `trial` to one trial of it. `user` is the
    /// person it was minted by or for (a person token acts as them; none for old agent tokens).
    Token {
        jti: TokenId,
        subject: String,
        role: Role,
        brief: Option<BriefId>,
        trial: Option<TrialId>,
        user: Option<UserId>,
    },
}

impl Principal {
    pub fn role(&self) -> Role {
        match self {
            Principal::User { role, .. } | Principal::Token { role, .. } => *role,
        }
    }

    /// A name for logs and the audit trail.
    pub fn label(&self) -> String {
        match self {
            Principal::User { email, .. } => email.clone(),
            Principal::Token { jti, subject, .. } => format!("token:{jti} ({subject})"),
        }
    }

    /// The person behind the caller: the signed-in user, or whoever a token was minted for.
    pub fn user_id(&self) -> Option<UserId> {
        match self {
            Principal::User { id, .. } => Some(*id),
            Principal::Token { user, .. } => *user,
        }
    }

    /// Whose `Idempotency-Key`s these are: one token, or one person's sessions. Keys of one caller
    /// never answer another's request.
    pub fn idempotency_scope(&self) -> String {
        match self {
            Principal::User { id, .. } => format!("user:{id}"),
            Principal::Token { jti, .. } => format!("token:{jti}"),
        }
    }

    /// Refuses a token limited to one brief: it may not create briefs or act outside that brief.
    pub fn require_unscoped(&self) -> Result<(), AppError> {
        match self.brief_scope() {
            Some(_) => Err(AppError::Forbidden(
                "this token is limited to one brief and cannot act outside it".into(),
            )),
            None => Ok(()),
        }
    }

    /// The trial a token is scoped to: it sends evidence and ledger lines to that trial only.
    pub fn trial_scope(&self) -> Option<TrialId> {
        match self {
            Principal::Token { trial, .. } => *trial,
            Principal::User { .. } => None,
        }
    }

    pub fn brief_scope(&self) -> Option<BriefId> {
        match self {
            Principal::Token { brief, .. } => *brief,
            Principal::User { .. } => None,
        }
    }

    /// People of `min` or higher; never agents. 403 otherwise.
    pub fn require_person(&self, min: Role) -> Result<(), AppError> {
        let role = self.role();
        if role == Role::Agent {
            return Err(AppError::Forbidden(
                "agent tokens may only send evidence and ledger lines".into(),
            ));
        }
        if role < min {
            return Err(AppError::Forbidden(format!(
                "this needs the {} role; you are {}",
                min.as_str(),
                role.as_str()
            )));
        }
        Ok(())
    }

    /// Reading a brief: any person; a brief-scoped token only its own brief.
    pub fn may_read_brief(&self, brief: BriefId) -> Result<(), AppError> {
        self.require_person(Role::Engineer)?;
        self.check_scope(brief)
    }

    /// Reading a trial's test plan: any person who may read the brief, and an agent token that may
    /// send to it (`collect --plan` fetches the plan it runs) — within its brief and, when scoped to
    /// one trial, that trial only. The plan holds commands and the brief's figures, never secrets.
    pub fn may_read_test_plan(&self, brief: BriefId, trial: TrialId) -> Result<(), AppError> {
        if self.role() != Role::Agent {
            return self.may_read_brief(brief);
        }
        self.check_scope(brief)?;
        match self.trial_scope() {
            Some(t) if t != trial => Err(AppError::Forbidden("this token is scoped to another trial".into())),
            _ => Ok(()),
        }
    }

    /// The role and scope half of sending evidence or ledger lines to a brief: an agent token for
    /// that brief, or an engineer+. Private on purpose: routes call `teams::may_send_to_brief`,
    /// which adds ownership, so no new route can skip it by calling this half alone.
    fn may_send_to_brief(&self, brief: BriefId) -> Result<(), AppError> {
        if self.role() != Role::Agent {
            self.require_person(Role::Engineer)?;
        }
        self.check_scope(brief)
    }

    pub(crate) fn check_scope(&self, brief: BriefId) -> Result<(), AppError> {
        match self.brief_scope() {
            Some(scope) if scope != brief => Err(AppError::Forbidden("this token is scoped to another brief".into())),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn token(role: Role, brief: Option<BriefId>) -> Principal {
        Principal::Token {
            jti: TokenId::from(Uuid::nil()),
            subject: "t".into(),
            role,
            brief,
            trial: None,
            user: None,
        }
    }

    #[test]
    fn the_role_table() {
        let a = BriefId::from(Uuid::now_v7());
        let b = BriefId::from(Uuid::now_v7());
        let t = TrialId::from(Uuid::now_v7());
        let other_trial = TrialId::from(Uuid::nil());
        let agent = token(Role::Agent, Some(a));
        assert!(agent.may_send_to_brief(a).is_ok());
        assert!(agent.may_send_to_brief(b).is_err(), "agent for A cannot send to B");
        assert!(agent.may_read_brief(a).is_err(), "agents only send");
        assert!(
            agent.may_read_test_plan(a, other_trial).is_ok(),
            "collect --plan reads its plan"
        );
        assert!(agent.may_read_test_plan(b, other_trial).is_err(), "not another brief's");
        let trial_agent = Principal::Token {
            jti: TokenId::from(Uuid::nil()),
            subject: "t".into(),
            role: Role::Agent,
            brief: Some(a),
            trial: Some(t),
            user: None,
        };
        assert!(trial_agent.may_read_test_plan(a, t).is_ok());
        assert!(
            trial_agent.may_read_test_plan(a, other_trial).is_err(),
            "not another trial's"
        );
        assert!(agent.require_person(Role::Engineer).is_err());

        let engineer = token(Role::Engineer, None);
        assert!(engineer.may_read_brief(b).is_ok());
        assert!(engineer.may_send_to_brief(b).is_ok());
        assert!(engineer.require_person(Role::Manager).is_err(), "only managers approve");
        assert!(engineer.require_person(Role::Admin).is_err());

        let manager = token(Role::Manager, None);
        assert!(manager.require_person(Role::Manager).is_ok());
        assert!(manager.require_person(Role::Admin).is_err(), "only admins manage users");
        assert!(token(Role::Admin, None).require_person(Role::Admin).is_ok());

        let scoped_engineer = token(Role::Engineer, Some(a));
        assert!(scoped_engineer.may_read_brief(b).is_err());
    }
}
