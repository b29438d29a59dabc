//! The last stage: a [`crate::Report`] as a terminal table ([`text`]), JSON ([`json`]) or a
//! self-contained HTML page ([`html`]).

pub mod escape;
pub(crate) mod fmt;
pub mod html;
pub mod json;
pub(crate) mod table;
pub mod text;
