//! Progress shown on stderr while long stages run (indicatif draws nothing when stderr
//! is not a terminal, so scripts and CI see only the stages' report lines).

/// A bar of `len` steps drawn with the indicatif `template` (its default style should
/// the template not parse).
pub fn bar(len: u64, template: &str) -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new(len);
    b.set_style(
        indicatif::ProgressStyle::with_template(template)
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    b
}

/// A spinner saying `what` is under way, ticking by itself: for work that gives no
/// counts, or counts with no known end (set them as its message).
pub fn spinner(what: &str) -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new_spinner();
    b.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} [{elapsed}]")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    b.set_message(what.to_string());
    b.enable_steady_tick(std::time::Duration::from_millis(200));
    b
}
