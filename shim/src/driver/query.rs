//! Direct calls to the real driver made by the shim itself (never through our wrappers, so
//! they are not counted): the device list for the session record, the topology and the
//! device-fault explanations; the launch and allocation explanations; the lifetime checks
//! and repairs. Used on the failure path, before a call only with `SEEDANCE_VALIDATE=pre`,
//! once at initialisation (session record, `cuLogsRegisterCallback`), and by
//! [`crate::faults::lifetime`] at a context destroy or reset, a free of pinned or stream-ordered
//! memory, and exit.
//!
//! Each entry point is looked up once, by name, in the library that holds the real
//! `cuInit`, and remembered; an entry point the driver lacks
//! (an older driver) makes its query return `None`, so the explanation leaves that fact out.
//!
//! One file per kind of question: [`context`], [`device`], [`limits`], [`stream`], [`logs`];
//! the look-up itself is `entry`.

mod context;
mod device;
mod entry;
mod limits;
mod logs;
mod stream;

pub use context::{
    ctx_get_current, ctx_get_device, ctx_synchronize, pointer_context, pointer_device,
    primary_active, primary_release, primary_retain, stream_get_ctx, with_context,
};
pub use device::{
    device_attribute, device_count, device_handle, device_total_mem, devices, driver_version,
    ordinal_of,
};
pub use limits::{allocation_granularity, func_attribute, mem_get_info, occupancy};
pub use logs::logs_register;
pub use stream::{
    event_create, event_record, stream_busy, stream_flags, stream_synchronize, stream_wait_event,
};
/// The host-write guard's queries; it is Linux-only (it reads through `process_vm_readv`).
#[cfg(target_os = "linux")]
pub use stream::{event_destroy, event_done, mem_host_alloc, stream_capturing};
