//! What every page's layout needs: who is signed in, and the CSRF token for its forms.

use crate::auth::extract::PageUser;

#[derive(Debug, Clone, Default)]
pub struct PageContext {
    pub email: Option<String>,
    pub role: &'static str,
    pub csrf: String,
    pub is_admin: bool,
}

impl PageContext {
    pub fn anonymous() -> Self {
        Self::default()
    }
}

impl From<&PageUser> for PageContext {
    fn from(user: &PageUser) -> Self {
        Self {
            email: Some(user.0.email.clone()),
            role: user.0.role.as_str(),
            csrf: user.0.csrf_token.clone(),
            is_admin: user.0.role == crate::auth::Role::Admin,
        }
    }
}
