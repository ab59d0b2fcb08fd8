//! Test fixtures (filled below).
