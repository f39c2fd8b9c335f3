"""The crawl report: one self-contained HTML file with inline SVG plots."""
