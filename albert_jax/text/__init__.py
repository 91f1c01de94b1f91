"""Text to ids: SentencePiece (ALBERT's own; `tokenization`) and WordPiece (`wordpiece`), the
special-id conventions, and finding a tokenizer in a directory. No JAX: input workers import it."""
