"""`lowtail analyze`: a PRE/POST capture pair analysed, judged, stored and shown."""
