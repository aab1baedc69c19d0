"""Input and output: model/cluster/strategy files, uploads, share links, exports, reports."""
