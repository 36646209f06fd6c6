"""File formats: bytes <-> :class:`skeletal.document.Document`. Nothing here knows about poses."""
