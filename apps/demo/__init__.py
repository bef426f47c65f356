"""The demo: ``manage.py load_demo`` makes the demo accounts and one study of each kind.

Nothing else imports this app; it only uses the other apps' services, like a client would.
"""
