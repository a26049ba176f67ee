//! Page-cache control for one dataset's files: evict, prewarm, and measure residency.
