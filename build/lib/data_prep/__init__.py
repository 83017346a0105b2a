"""Text -> TFRecord tools for ALBERT pretraining (no dependency on albert_tf)."""
