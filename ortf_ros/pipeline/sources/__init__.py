"""Where raw messages come from: a recording on disk, or live subscriptions."""
