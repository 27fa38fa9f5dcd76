//! The state of one child of a set, as the set controller sees it: what the set's
//! status and its acceptance are both computed from.

use crate::api::status::Phase;

/// The state of one child as the set controller sees it.
#[derive(Clone, Debug, PartialEq)]
pub enum ChildState {
    NotCreated,
    Created {
        phase: Phase,
        message: Option<String>,
    },
}

impl ChildState {
    pub(super) fn symbol(&self) -> char {
        match self {
            Self::NotCreated => '-',
            Self::Created { phase, .. } => match phase {
                Phase::Pending => 'P',
                Phase::Running => 'R',
                Phase::Succeeded => 'S',
                Phase::Failed => 'F',
            },
        }
    }

    pub(super) fn is_active(&self) -> bool {
        matches!(self, Self::Created { phase, .. } if !phase.is_finished())
    }

    pub(super) fn is_finished(&self) -> bool {
        matches!(self, Self::Created { phase, .. } if phase.is_finished())
    }
}
