"""Drop DRF's authtoken table: its tokens were stored in plain text and never expired.

API tokens are now django-rest-knox tokens (hashed, with an expiry); every old token stops
working and users sign in again with ``POST /api/auth/token/``.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("accounts", "0002_addressed_invitations")]

    operations = [
        migrations.RunSQL("DROP TABLE IF EXISTS authtoken_token", migrations.RunSQL.noop),
    ]
