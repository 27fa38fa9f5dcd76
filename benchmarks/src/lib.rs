pub mod kinds;
pub mod parse_error;

pub fn placeholder() {}
