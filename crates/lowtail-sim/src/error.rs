/// Why a simulation did not run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A spec value out of its range (the message says which and why).
    #[error("{0}")]
    Spec(String),
}
