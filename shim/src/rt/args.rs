//! Argument values for `call_failed` events: numbers stay numbers, pointers and handles
//! become hex strings. Only the value of a pointer is recorded, never what it points to.

/// One argument of a failed call, converted without dereferencing anything.
#[derive(Clone)]
pub enum ArgVal {
    /// An unsigned integer (sizes in bytes, flags, dims).
    U(u64),
    /// A signed integer (ordinals, `CUdevice`, counts).
    I(i64),
    /// A pointer or opaque handle, recorded as its address.
    P(usize),
    /// A name passed as a string argument (the symbol asked of `cuGetProcAddress`).
    Text(String),
}

impl ArgVal {
    /// The JSON form used in the trace.
    pub fn to_json(&self) -> serde_json::Value {
        match *self {
            ArgVal::U(v) => serde_json::Value::from(v),
            ArgVal::I(v) => serde_json::Value::from(v),
            ArgVal::P(v) => serde_json::Value::from(format!("{v:#x}")),
            ArgVal::Text(ref s) => serde_json::Value::from(s.as_str()),
        }
    }
}

impl From<u8> for ArgVal {
    fn from(v: u8) -> Self {
        ArgVal::U(v.into())
    }
}
impl From<u16> for ArgVal {
    fn from(v: u16) -> Self {
        ArgVal::U(v.into())
    }
}
impl From<u32> for ArgVal {
    fn from(v: u32) -> Self {
        ArgVal::U(v.into())
    }
}
impl From<u64> for ArgVal {
    fn from(v: u64) -> Self {
        ArgVal::U(v)
    }
}
impl From<usize> for ArgVal {
    fn from(v: usize) -> Self {
        ArgVal::U(v as u64)
    }
}
impl From<i32> for ArgVal {
    fn from(v: i32) -> Self {
        ArgVal::I(v.into())
    }
}
impl<T> From<*mut T> for ArgVal {
    fn from(v: *mut T) -> Self {
        ArgVal::P(v as usize)
    }
}
impl<T> From<*const T> for ArgVal {
    fn from(v: *const T) -> Self {
        ArgVal::P(v as usize)
    }
}
