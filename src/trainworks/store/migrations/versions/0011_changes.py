"""changes: the feed controllers act on

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Appended in the writer's transaction, read by sequence number, pruned by age (kernel/changes.py).
    op.create_table(
        "changes",
        sa.Column(
            "seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("row_id", sa.BigInteger(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sqlite_autoincrement=True,  # never reuse a number once the rows below a cursor are pruned
    )


def downgrade() -> None:
    op.drop_table("changes")
