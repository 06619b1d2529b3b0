"""Variants the lab measured against the product and did not ship, behind the product's public seams."""
