"""OAuth: logging in to remote servers, and checking the tokens of the gateway's callers."""
