//! User code runs under [`catch_user`]: a panic in it becomes an error that names the
//! transform and the element, so Rust's own panic message (and backtrace) is not
//! printed as well. A panic anywhere else still prints as usual.

use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

thread_local! {
    /// How deep this thread is in user code run by [`catch_user`].
    static IN_USER_CODE: Cell<u32> = const { Cell::new(0) };
}

static HOOK: Once = Once::new();

/// Runs user code `f`, catching a panic: the caller turns it into an error. While it
/// runs, the panic hook stays quiet on this thread.
///
/// ```
/// use std::panic::AssertUnwindSafe;
/// let r = tidewater::exec::catch_user(AssertUnwindSafe(|| panic!("boom")));
/// assert!(r.is_err());
/// ```
pub fn catch_user<R>(f: AssertUnwindSafe<impl FnOnce() -> R>) -> std::thread::Result<R> {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_USER_CODE.with(|d| d.get()) == 0 {
                previous(info);
            }
        }));
    });
    IN_USER_CODE.with(|d| d.set(d.get() + 1));
    let r = catch_unwind(f);
    IN_USER_CODE.with(|d| d.set(d.get() - 1));
    r
}
