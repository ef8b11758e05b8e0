"""Bundles: stored runs carried to another database (`lowtail export` / `lowtail import`)."""
