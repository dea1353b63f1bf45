-- revision 0018
CREATE TABLE audio (
	idx INTEGER NOT NULL, 
	blob_id INTEGER NOT NULL, 
	sample_rate DOUBLE, 
	num_channels INTEGER, 
	length_frames BIGINT, 
	content_type TEXT, 
	label TEXT, 
	series_id INTEGER NOT NULL, 
	step BIGINT NOT NULL, 
	file_id INTEGER NOT NULL, 
	record_offset BIGINT NOT NULL, 
	value_index INTEGER NOT NULL, 
	wall_time DOUBLE, 
	CONSTRAINT pk_audio PRIMARY KEY (series_id, step, file_id, record_offset, value_index, idx), 
	CONSTRAINT fk_audio_blob_id_blobs FOREIGN KEY(blob_id) REFERENCES blobs (id), 
	CONSTRAINT fk_audio_file_id_event_files FOREIGN KEY(file_id) REFERENCES event_files (id), 
	CONSTRAINT fk_audio_series_id_series FOREIGN KEY(series_id) REFERENCES series (id)
)
 WITHOUT ROWID

;
CREATE TABLE blobs (
	id INTEGER NOT NULL, 
	sha256 TEXT NOT NULL, 
	size BIGINT NOT NULL, 
	data BLOB NOT NULL, 
	CONSTRAINT pk_blobs PRIMARY KEY (id), 
	CONSTRAINT uq_blobs_sha256 UNIQUE (sha256)
);
CREATE TABLE contexts (
	id INTEGER NOT NULL, 
	name TEXT NOT NULL, 
	CONSTRAINT pk_contexts PRIMARY KEY (id), 
	CONSTRAINT uq_contexts_name UNIQUE (name)
);
CREATE TABLE conversions (
	id INTEGER NOT NULL, 
	logdir TEXT NOT NULL, 
	tool_version TEXT NOT NULL, 
	started_at DOUBLE NOT NULL, 
	finished_at DOUBLE, 
	status TEXT NOT NULL, 
	options TEXT, 
	summary TEXT, 
	CONSTRAINT pk_conversions PRIMARY KEY (id)
);
CREATE TABLE current_summaries (
	series_id INTEGER NOT NULL, 
	points BIGINT NOT NULL, 
	last_step BIGINT, 
	last_value DOUBLE, 
	min_value DOUBLE, 
	max_value DOUBLE, 
	value_sum DOUBLE, 
	value_count BIGINT, 
	argmin_step BIGINT, 
	argmax_step BIGINT, 
	all_points BIGINT NOT NULL, 
	written_file_id INTEGER NOT NULL, 
	written_record_offset BIGINT NOT NULL, 
	written_value_index INTEGER NOT NULL, 
	written_step BIGINT NOT NULL, 
	CONSTRAINT pk_current_summaries PRIMARY KEY (series_id), 
	CONSTRAINT fk_current_summaries_series_id_series FOREIGN KEY(series_id) REFERENCES series (id), 
	CONSTRAINT fk_current_summaries_written_file_id_event_files FOREIGN KEY(written_file_id) REFERENCES event_files (id)
);
CREATE TABLE event_files (
	id INTEGER NOT NULL, 
	run_id INTEGER NOT NULL, 
	context_id INTEGER NOT NULL, 
	path TEXT NOT NULL, 
	size BIGINT NOT NULL, 
	mtime_ns BIGINT NOT NULL, 
	head_digest TEXT, 
	offset_consumed BIGINT NOT NULL, 
	records BIGINT NOT NULL, 
	damaged_records BIGINT NOT NULL, 
	status TEXT NOT NULL, 
	last_error TEXT, 
	first_wall_time DOUBLE, 
	last_wall_time DOUBLE, 
	updated_at DOUBLE, selection TEXT, 
	CONSTRAINT pk_event_files PRIMARY KEY (id), 
	CONSTRAINT fk_event_files_run_id_runs FOREIGN KEY(run_id) REFERENCES runs (id), 
	CONSTRAINT fk_event_files_context_id_contexts FOREIGN KEY(context_id) REFERENCES contexts (id), 
	CONSTRAINT uq_event_files_run_id_path UNIQUE (run_id, path)
);
CREATE TABLE file_heads (
	source TEXT NOT NULL, 
	path TEXT NOT NULL, 
	size BIGINT NOT NULL, 
	mtime_ns BIGINT NOT NULL, 
	tags TEXT NOT NULL, 
	CONSTRAINT pk_file_heads PRIMARY KEY (source, path)
);
CREATE TABLE "histograms" (
	count DOUBLE, 
	min DOUBLE, 
	max DOUBLE, 
	sum DOUBLE, 
	sum_squares DOUBLE, 
	buckets TEXT NOT NULL, 
	series_id INTEGER NOT NULL, 
	step BIGINT NOT NULL, 
	file_id INTEGER NOT NULL, 
	record_offset BIGINT NOT NULL, 
	value_index INTEGER NOT NULL, 
	wall_time DOUBLE, raw_buckets TEXT, 
	CONSTRAINT pk_histograms PRIMARY KEY (series_id, step, file_id, record_offset, value_index), 
	CONSTRAINT fk_histograms_file_id_event_files FOREIGN KEY(file_id) REFERENCES event_files (id), 
	CONSTRAINT fk_histograms_series_id_series FOREIGN KEY(series_id) REFERENCES series (id)
);
CREATE TABLE images (
	idx INTEGER NOT NULL, 
	blob_id INTEGER NOT NULL, 
	format TEXT, 
	width INTEGER, 
	height INTEGER, 
	series_id INTEGER NOT NULL, 
	step BIGINT NOT NULL, 
	file_id INTEGER NOT NULL, 
	record_offset BIGINT NOT NULL, 
	value_index INTEGER NOT NULL, 
	wall_time DOUBLE, 
	CONSTRAINT pk_images PRIMARY KEY (series_id, step, file_id, record_offset, value_index, idx), 
	CONSTRAINT fk_images_blob_id_blobs FOREIGN KEY(blob_id) REFERENCES blobs (id), 
	CONSTRAINT fk_images_file_id_event_files FOREIGN KEY(file_id) REFERENCES event_files (id), 
	CONSTRAINT fk_images_series_id_series FOREIGN KEY(series_id) REFERENCES series (id)
)
 WITHOUT ROWID

;
CREATE TABLE params (
	"key" TEXT NOT NULL, 
	value TEXT, 
	value_num DOUBLE, 
	value_type TEXT NOT NULL, 
	series_id INTEGER NOT NULL, 
	step BIGINT NOT NULL, 
	file_id INTEGER NOT NULL, 
	record_offset BIGINT NOT NULL, 
	value_index INTEGER NOT NULL, 
	wall_time DOUBLE, 
	CONSTRAINT pk_params PRIMARY KEY (series_id, step, file_id, record_offset, value_index, "key"), 
	CONSTRAINT fk_params_file_id_event_files FOREIGN KEY(file_id) REFERENCES event_files (id), 
	CONSTRAINT fk_params_series_id_series FOREIGN KEY(series_id) REFERENCES series (id)
)
 WITHOUT ROWID

;
CREATE TABLE push_destinations (
	tracker TEXT NOT NULL, 
	location TEXT NOT NULL, 
	name TEXT NOT NULL, 
	destination TEXT NOT NULL, 
	recorded_at DOUBLE, 
	CONSTRAINT pk_push_destinations PRIMARY KEY (tracker, location, name)
);
CREATE TABLE push_marks (
	destination TEXT NOT NULL, 
	series_id BIGINT NOT NULL, 
	point_table TEXT NOT NULL, 
	file_id BIGINT NOT NULL, 
	file_path TEXT NOT NULL, 
	file_digest TEXT, 
	record_offset BIGINT NOT NULL, 
	value_index INTEGER NOT NULL, 
	points BIGINT NOT NULL, 
	CONSTRAINT pk_push_marks PRIMARY KEY (destination, series_id, point_table, file_id)
);
CREATE TABLE push_runs (
	destination TEXT NOT NULL, 
	run_id BIGINT NOT NULL, 
	remote_id TEXT NOT NULL, 
	pending BOOLEAN NOT NULL, 
	pushed_at DOUBLE, 
	CONSTRAINT pk_push_runs PRIMARY KEY (destination, run_id)
);
CREATE TABLE run_params (
	run_id INTEGER NOT NULL, 
	"key" TEXT NOT NULL, 
	value TEXT, 
	value_num DOUBLE, 
	value_type TEXT NOT NULL, 
	CONSTRAINT pk_run_params PRIMARY KEY (run_id, "key"), 
	CONSTRAINT fk_run_params_run_id_runs FOREIGN KEY(run_id) REFERENCES runs (id)
);
CREATE TABLE "runs" (
	id INTEGER NOT NULL, 
	logdir TEXT NOT NULL, 
	run_path TEXT NOT NULL, 
	group_path TEXT NOT NULL, 
	name TEXT NOT NULL, 
	source TEXT NOT NULL, 
	host TEXT, 
	CONSTRAINT pk_runs PRIMARY KEY (id), 
	CONSTRAINT uq_runs_source_run_path UNIQUE (source, run_path)
);
CREATE TABLE scalars (
	series_id INTEGER NOT NULL, 
	step BIGINT NOT NULL, 
	file_id INTEGER NOT NULL, 
	record_offset BIGINT NOT NULL, 
	value_index INTEGER NOT NULL, 
	wall_time DOUBLE, 
	value DOUBLE, 
	CONSTRAINT pk_scalars PRIMARY KEY (series_id, step, file_id, record_offset, value_index), 
	CONSTRAINT fk_scalars_series_id_series FOREIGN KEY(series_id) REFERENCES series (id), 
	CONSTRAINT fk_scalars_file_id_event_files FOREIGN KEY(file_id) REFERENCES event_files (id)
)
 WITHOUT ROWID

;
CREATE TABLE series (
	id INTEGER NOT NULL, 
	run_id INTEGER NOT NULL, 
	context_id INTEGER NOT NULL, 
	name TEXT NOT NULL, 
	plugin TEXT NOT NULL, 
	dtype TEXT, 
	display_name TEXT, 
	description TEXT, 
	plugin_content BLOB, 
	CONSTRAINT pk_series PRIMARY KEY (id), 
	CONSTRAINT fk_series_run_id_runs FOREIGN KEY(run_id) REFERENCES runs (id), 
	CONSTRAINT fk_series_context_id_contexts FOREIGN KEY(context_id) REFERENCES contexts (id), 
	CONSTRAINT uq_series_run_id_context_id_name_plugin UNIQUE (run_id, context_id, name, plugin)
);
CREATE TABLE series_summaries (
	series_id INTEGER NOT NULL, 
	point_table TEXT NOT NULL, 
	points BIGINT NOT NULL, 
	first_step BIGINT NOT NULL, 
	last_step BIGINT NOT NULL, 
	first_wall_time DOUBLE, 
	last_wall_time DOUBLE, 
	last_file_id INTEGER NOT NULL, 
	last_record_offset BIGINT NOT NULL, 
	last_value_index INTEGER NOT NULL, 
	last_point_wall_time DOUBLE, 
	last_value DOUBLE, 
	min_value DOUBLE, 
	max_value DOUBLE, value_sum DOUBLE, value_count BIGINT, argmin_step BIGINT, argmax_step BIGINT, maybe_resumed BOOLEAN DEFAULT 0 NOT NULL, run_id INTEGER, context_id INTEGER, name TEXT, plugin TEXT, 
	CONSTRAINT pk_series_summaries PRIMARY KEY (series_id, point_table), 
	CONSTRAINT fk_series_summaries_series_id_series FOREIGN KEY(series_id) REFERENCES series (id), 
	CONSTRAINT fk_series_summaries_last_file_id_event_files FOREIGN KEY(last_file_id) REFERENCES event_files (id)
);
CREATE TABLE tbconvert_alembic_version (
	version_num VARCHAR(32) NOT NULL, 
	CONSTRAINT tbconvert_alembic_version_pkc PRIMARY KEY (version_num)
);
INSERT INTO "tbconvert_alembic_version" VALUES('0018');
CREATE TABLE tensors (
	dtype TEXT NOT NULL, 
	shape TEXT NOT NULL, 
	blob_id INTEGER NOT NULL, 
	series_id INTEGER NOT NULL, 
	step BIGINT NOT NULL, 
	file_id INTEGER NOT NULL, 
	record_offset BIGINT NOT NULL, 
	value_index INTEGER NOT NULL, 
	wall_time DOUBLE, 
	CONSTRAINT pk_tensors PRIMARY KEY (series_id, step, file_id, record_offset, value_index), 
	CONSTRAINT fk_tensors_blob_id_blobs FOREIGN KEY(blob_id) REFERENCES blobs (id), 
	CONSTRAINT fk_tensors_file_id_event_files FOREIGN KEY(file_id) REFERENCES event_files (id), 
	CONSTRAINT fk_tensors_series_id_series FOREIGN KEY(series_id) REFERENCES series (id)
)
 WITHOUT ROWID

;
CREATE TABLE "texts" (
	idx INTEGER NOT NULL, 
	value TEXT NOT NULL, 
	series_id INTEGER NOT NULL, 
	step BIGINT NOT NULL, 
	file_id INTEGER NOT NULL, 
	record_offset BIGINT NOT NULL, 
	value_index INTEGER NOT NULL, 
	wall_time DOUBLE, 
	CONSTRAINT pk_texts PRIMARY KEY (series_id, step, file_id, record_offset, value_index, idx), 
	CONSTRAINT fk_texts_file_id_event_files FOREIGN KEY(file_id) REFERENCES event_files (id), 
	CONSTRAINT fk_texts_series_id_series FOREIGN KEY(series_id) REFERENCES series (id)
);
CREATE INDEX ix_images_blob_id ON images (blob_id);
CREATE INDEX ix_audio_blob_id ON audio (blob_id);
CREATE INDEX ix_tensors_blob_id ON tensors (blob_id);
CREATE INDEX ix_runs_group_path ON runs (group_path);
CREATE VIEW v_scalars AS 
        SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag, p.step, p.wall_time, p.value
        FROM scalars AS p 
    JOIN series AS s ON s.id = p.series_id
    JOIN runs AS r ON r.id = s.run_id
    JOIN contexts AS c ON c.id = s.context_id;
CREATE VIEW v_images AS 
        SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag, p.step, p.wall_time, p.idx, p.format, p.width, p.height, b.data
        FROM images AS p 
    JOIN series AS s ON s.id = p.series_id
    JOIN runs AS r ON r.id = s.run_id
    JOIN contexts AS c ON c.id = s.context_id
 JOIN blobs AS b ON b.id = p.blob_id;
CREATE VIEW v_texts AS 
        SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag, p.step, p.wall_time, p.idx, p.value
        FROM texts AS p 
    JOIN series AS s ON s.id = p.series_id
    JOIN runs AS r ON r.id = s.run_id
    JOIN contexts AS c ON c.id = s.context_id;
CREATE VIEW v_audio AS 
        SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag, p.step, p.wall_time, p.idx, p.sample_rate, b.data
        FROM audio AS p 
    JOIN series AS s ON s.id = p.series_id
    JOIN runs AS r ON r.id = s.run_id
    JOIN contexts AS c ON c.id = s.context_id
 JOIN blobs AS b ON b.id = p.blob_id;
CREATE VIEW v_tensors AS 
        SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag, s.plugin, p.step, p.wall_time, p.dtype, p.shape, b.data
        FROM tensors AS p 
    JOIN series AS s ON s.id = p.series_id
    JOIN runs AS r ON r.id = s.run_id
    JOIN contexts AS c ON c.id = s.context_id
 JOIN blobs AS b ON b.id = p.blob_id;
CREATE VIEW v_last_scalars AS 
        SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag, m.last_step AS step, m.last_point_wall_time AS wall_time,
               m.last_value AS value
        FROM series_summaries AS m 
        JOIN series AS s ON s.id = m.series_id
        JOIN runs AS r ON r.id = s.run_id
        JOIN contexts AS c ON c.id = s.context_id
        WHERE m.point_table = 'scalars';
CREATE VIEW v_series AS 
        SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag, s.plugin, t.points, t.first_step, t.last_step, t.first_wall_time,
               t.last_wall_time, m.last_value, m.min_value, m.max_value
        FROM (SELECT series_id, CAST(sum(points) AS BIGINT) AS points,
                     min(first_step) AS first_step, max(last_step) AS last_step,
                     min(first_wall_time) AS first_wall_time,
                     max(last_wall_time) AS last_wall_time
              FROM series_summaries GROUP BY series_id) AS t
        JOIN series AS s ON s.id = t.series_id
        JOIN runs AS r ON r.id = s.run_id
        JOIN contexts AS c ON c.id = s.context_id
        LEFT JOIN series_summaries AS m ON m.series_id = t.series_id
         AND m.point_table = 'scalars';
CREATE VIEW v_histograms AS 
        SELECT r.id AS run_id, r.run_path, c.name AS context, s.name AS tag, p.step,
               p.wall_time, p.count, p.min, p.max, p.buckets
        FROM histograms AS p
    JOIN series AS s ON s.id = p.series_id
    JOIN runs AS r ON r.id = s.run_id
    JOIN contexts AS c ON c.id = s.context_id;
CREATE VIEW v_scalars_current AS 
WITH ordered AS (
    SELECT p.series_id, s.run_id, s.context_id, s.name AS tag, f.path, p.record_offset,
           p.value_index, p.step, p.wall_time, p.value,
           CASE WHEN p.step < lag(p.step) OVER written THEN p.step END AS restart
    FROM scalars AS p
    JOIN series AS s ON s.id = p.series_id
    JOIN event_files AS f ON f.id = p.file_id
    WINDOW written AS (PARTITION BY p.series_id ORDER BY f.path, p.record_offset, p.value_index)
), attempts AS (
    SELECT o.*, min(o.restart) OVER (
        PARTITION BY o.series_id ORDER BY o.path, o.record_offset, o.value_index
        ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING
    ) AS later_restart
    FROM ordered AS o
)
SELECT r.id AS run_id, r.run_path, c.name AS context, a.tag, a.step, a.wall_time, a.value
FROM attempts AS a
JOIN runs AS r ON r.id = a.run_id
JOIN contexts AS c ON c.id = a.context_id
WHERE (a.later_restart IS NULL OR a.later_restart > a.step)
  AND NOT EXISTS (
    SELECT 1 FROM (SELECT s.run_id, s.context_id, f.path, t.record_offset, t.step FROM tensors AS t JOIN series AS s ON s.id = t.series_id JOIN event_files AS f ON f.id = t.file_id JOIN blobs AS b ON b.id = t.blob_id WHERE s.plugin = 'session_log' AND substr(b.data, 1, 2) = X'0801') AS start
    WHERE start.run_id = a.run_id AND start.context_id = a.context_id
      AND start.step <= a.step
      AND (start.path > a.path OR (start.path = a.path AND start.record_offset > a.record_offset))
  );
CREATE VIEW v_runs AS 
        SELECT r.id AS run_id, r.logdir, r.run_path, r.group_path, r.name, 
        (SELECT min(f.first_wall_time) FROM event_files AS f WHERE f.run_id = r.id)
            AS first_wall_time,
        (SELECT max(f.last_wall_time) FROM event_files AS f WHERE f.run_id = r.id)
            AS last_wall_time,
               r.source, r.host
        FROM runs AS r
        WHERE EXISTS (SELECT 1 FROM series AS s WHERE s.run_id = r.id)
           OR NOT EXISTS (SELECT 1 FROM event_files AS f WHERE f.run_id = r.id
                          AND f.status = 'invalid')
           OR EXISTS (SELECT 1 FROM event_files AS f WHERE f.run_id = r.id
                      AND f.status <> 'invalid');
CREATE INDEX ix_params_series_id_key ON params (series_id, "key");
CREATE VIEW v_params AS 
        SELECT r.id AS run_id, r.run_path, c.name AS context, p.key, p.value, p.value_num,
               p.value_type
        FROM params AS p
    JOIN series AS s ON s.id = p.series_id
    JOIN runs AS r ON r.id = s.run_id
    JOIN contexts AS c ON c.id = s.context_id

        WHERE s.name NOT IN ('hparams.yaml', 'params.json') OR NOT EXISTS (
            SELECT 1 FROM series AS o JOIN params AS q ON q.series_id = o.id
            WHERE o.run_id = r.id AND o.plugin = 'hparams' AND q.key = p.key
              AND (o.name NOT IN ('hparams.yaml', 'params.json') OR o.name < s.name));
CREATE INDEX ix_series_summaries_maybe_resumed ON series_summaries (series_id) WHERE maybe_resumed;
CREATE INDEX ix_series_name_plugin ON series (name, plugin, context_id, run_id);
CREATE INDEX ix_series_summaries_tag ON series_summaries (point_table, plugin, name, run_id, context_id, series_id, maybe_resumed, last_value, min_value, max_value, points, value_sum, value_count, argmin_step, argmax_step);
CREATE INDEX ix_run_params_key_value_num ON run_params ("key", value_num, run_id);
