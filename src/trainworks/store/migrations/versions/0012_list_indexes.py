"""list indexes: job pages that seek a state, a display name or a label (labels.KEY=VALUE, through label rows)

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# job table -> its label rows' table
JOB_TABLES = {
    "custom_jobs": "custom_job_labels",
    "tuning_jobs": "tuning_job_labels",
    "training_pipelines": "training_pipeline_labels",
}
# The labels JSON object as (key, value) rows: SQLite's json_each, PostgreSQL's json_each_text.
EACH_LABEL = {"sqlite": "json_each(j.labels) AS l", "postgresql": "json_each_text(j.labels) AS l"}


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    for jobs, labels in JOB_TABLES.items():
        # The parent's pages carry state and display name: a walk tests those filters in the index.
        op.drop_index(f"ix_{jobs}_parent_created", table_name=jobs)
        op.create_index(
            f"ix_{jobs}_parent_created",
            jobs,
            ["project_number", "location", "create_time", "id", "state", "display_name"],
        )
        op.create_index(
            f"ix_{jobs}_parent_state", jobs, ["project_number", "location", "state", "create_time", "id"]
        )
        op.create_index(
            f"ix_{jobs}_parent_name",
            jobs,
            ["project_number", "location", "display_name", "create_time", "id"],
        )
        op.create_index(f"ix_{jobs}_id_state", jobs, ["id", "state"])
        op.create_table(
            labels,
            sa.Column("job_id", sa.BigInteger(), nullable=False),
            sa.Column("key", sa.Text(), nullable=False),
            sa.Column("value", sa.Text(), nullable=False),
            sa.Column("project_number", sa.String(length=20), nullable=False),
            sa.Column("location", sa.String(length=64), nullable=False),
            sa.Column("create_time", sa.DateTime(timezone=True), nullable=False),
            sa.ForeignKeyConstraint(["job_id"], [f"{jobs}.id"], ondelete="CASCADE"),
            sa.PrimaryKeyConstraint("job_id", "key"),
        )
        # The jobs stored so far: their labels never change, so one copy now stays right.
        op.execute(
            f"INSERT INTO {labels} (job_id, key, value, project_number, location, create_time) "
            f"SELECT j.id, l.key, l.value, j.project_number, j.location, j.create_time "
            f"FROM {jobs} AS j, {EACH_LABEL[dialect]}"
        )
        op.create_index(
            f"ix_{labels}_seek",
            labels,
            ["key", "value", "project_number", "location", "create_time", "job_id"],
        )


def downgrade() -> None:
    for jobs, labels in JOB_TABLES.items():
        op.drop_index(f"ix_{labels}_seek", table_name=labels)
        op.drop_table(labels)
        op.drop_index(f"ix_{jobs}_id_state", table_name=jobs)
        op.drop_index(f"ix_{jobs}_parent_name", table_name=jobs)
        op.drop_index(f"ix_{jobs}_parent_state", table_name=jobs)
        op.drop_index(f"ix_{jobs}_parent_created", table_name=jobs)
        op.create_index(
            f"ix_{jobs}_parent_created", jobs, ["project_number", "location", "create_time", "id"]
        )
