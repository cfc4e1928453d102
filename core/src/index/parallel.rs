//! Two threads for one search, from the size where that pays.

/// From this many memories a search runs on two threads: the 8-bit scan split between
/// them, one of them ranking BM25 first. Each list takes milliseconds there, and a
/// thread costs tens of microseconds.
pub const PARALLEL_LISTS_FROM: usize = 20_000;

/// `a()` on a scoped thread beside `b()` on this one; both on this one if the system
/// cannot start a thread. A panic in `a` is resumed here, as if it had run here.
pub(crate) fn both<A: Send, B>(a: impl Fn() -> A + Sync, b: impl FnOnce() -> B) -> (A, B) {
    std::thread::scope(
        |scope| match std::thread::Builder::new().spawn_scoped(scope, &a) {
            Ok(handle) => {
                let b = b();
                match handle.join() {
                    Ok(a) => (a, b),
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
            Err(_) => (a(), b()),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_returns_each_result_and_resumes_a_panic() {
        assert_eq!(both(|| 1, || "b"), (1, "b"));
        let panicked = std::panic::catch_unwind(|| both(|| -> u8 { panic!("in a") }, || 2));
        assert!(panicked.is_err());
    }
}
