"""subgate's relational store: typed models, engine set-up, repositories and the journal writer.

Nothing here imports proton; the gateway hands plain records in and gets plain records back.
"""
