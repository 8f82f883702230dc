//! What a plugin exports: functions and their arguments, classes, the
//! `Plugin` builder, the handshake schema and the Scriptling source the
//! SDK writes. Descriptions only: nothing here runs a call.

pub(crate) mod class;
pub(crate) mod core;
pub(crate) mod describe;
pub(crate) mod error;
pub(crate) mod function;
pub(crate) mod plugin;
pub(crate) mod private;
pub(crate) mod schema;
pub(crate) mod script;
