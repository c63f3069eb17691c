"""What the user-facing pages promise, and the tests that fail when a promise stops being true.

How the promises were found: every section of README.md, docs/guide.md, docs/reference.md and the task pages
in docs/ (not design.md and architecture.md, which say why, for contributors) read sentence by sentence; a
sentence that says what the product does or guarantees - not what the user should do, nor what SageMaker or
another tool does - is a promise. Each is named by words of its sentence (whitespace folded) under its
section's heading, with the tests that assert it. The generated tables of docs/reference.md are held to their
declarations by tests/static/test_docs.py, and each declaration row to its behaviour by the tests named here
for the table's section. A section whose text promises nothing (how to push an image, where the links are) is
named in INSTRUCTIONS. tests/static/test_promises.py holds this map to the pages: a section with neither, a
promise whose words are gone, or a test that does not exist fails it."""
from __future__ import annotations

from typing import NamedTuple


class Promise(NamedTuple):
    page: str  # a path from the repository's root
    section: str  # the heading it stands under, as written (without the #s)
    words: str  # words of the sentence, as written (whitespace folded)
    tests: tuple[str, ...]  # "tests/<path>.py::<test function>"


R, G, REF = "README.md", "docs/guide.md", "docs/reference.md"
AWS, EFA, HANGS, KERAS = ("docs/from-aws-tensorflow-containers.md", "docs/gpu-and-efa.md", "docs/hangs-and-failures.md",
                          "docs/horovod-keras.md")
PIPES = "tests/process/test_pipes.py::"
MULTI = "tests/cluster/test_multihost.py::"
STALL = "tests/process/test_stall.py::"
CKPT = "tests/process/test_checkpoints.py::"
DISK = "tests/process/test_checkpoint_disk.py::"
OUTCOME = "tests/process/test_outcome.py::"
SDKLOCAL = "tests/sdk/test_local_mode.py::"

PROMISES: tuple[Promise, ...] = (
    # README.md
    Promise(R, "smtrain: a TensorFlow + Horovod training container for Amazon SageMaker",
            "gives your script the arguments and `SM_*` variables SageMaker's own toolkits would",
            ("tests/process/test_conformance.py::test_program_sees_what_sagemaker_training_gives",
             "tests/process/test_conformance_tf.py::test_program_sees_what_the_tensorflow_container_gives")),
    Promise(R, "smtrain: a TensorFlow + Horovod training container for Amazon SageMaker",
            "ends every host with the job's outcome - its exit status, a failure reason naming the rank and host, no "
            "process left behind",
            (MULTI + "test_a_crashing_rank_on_a_worker_ends_every_host",)),
    Promise(R, "smtrain: a TensorFlow + Horovod training container for Amazon SageMaker",
            "while a job runs, every host's and rank's metrics reach TensorBoard and a rank the others wait for is "
            "named in the log",
            ("tests/cluster/test_live_metrics.py::test_a_running_jobs_metrics_reach_tensorboard_and_its_slow_rank_then_host_is_named",)),
    Promise(R, "3. Run it", "`plan.json` is what `train` will do, run nothing",
            ("tests/process/test_bad_input.py::test_dry_run_prints_the_plan_and_runs_nothing",
             "tests/sdk/test_readme_path.py::test_a_new_user_reaches_a_local_job_and_its_report_then_the_sdk_v3_local_job")),
    Promise(R, "3. Run it", "The container's exit status is the script's",
            ("tests/image/test_image.py::test_docker_run_passes_the_status_through_and_writes_the_failure_file",)),
    Promise(R, "3. Run it", "stops it as SageMaker does: SIGTERM, then the grace period (110 s)",
            ("tests/image/test_image.py::test_docker_stop_delivers_sigterm_to_the_program",
             "tests/process/test_signals.py::test_program_that_ignores_sigterm_is_killed_after_the_grace_period")),
    Promise(R, "3. Run it", "The model is `ml/model/model.keras`; open `ml/output/data/profiler-report/profiler-report.html` "
            "in a browser for the report",
            ("tests/sdk/test_readme_path.py::test_a_new_user_reaches_a_local_job_and_its_report_then_the_sdk_v3_local_job",)),
    Promise(R, "4. The same job through SDK v3's local mode", "leaves the model in `artifacts/model/model.keras` and the "
            "report in `artifacts/output/data/profiler-report/`",
            ("tests/sdk/test_readme_path.py::test_a_new_user_reaches_a_local_job_and_its_report_then_the_sdk_v3_local_job",)),
    Promise(R, "A job with SDK v3's ModelTrainer", "a script written for `PipeModeDataset` works too",
            ("tests/process/test_deepfm_example.py::test_deepfm_learns_checkpoints_and_resumes",
             "tests/process/test_pipemode_dataset.py::test_each_horovod_rank_reads_its_own_fifos_through_train")),
    Promise(R, "A job with SDK v3's ModelTrainer", "TensorFlow's strategies: the SDK v2 name of the distribution as a "
            "hyperparameter",
            ("tests/unit/test_local_mode.py::test_model_trainer_with_a_strategy_hyperparameter_runs_multi_worker_mirrored",)),
    Promise(R, "4. The same job through SDK v3's local mode", "runs a 2-host Horovod job in two containers",
            (SDKLOCAL + "test_a_horovod_job_of_two_instances_and_two_processes_each_runs_through_train",)),
    Promise(R, "A job with SDK v3's ModelTrainer", "the image hands that first command over to `train`",
            ("tests/process/test_local_mode.py::test_the_image_hook_turns_modeltrainers_first_bash_into_train_and_nothing_else",
             "tests/process/test_conformance_modeltrainer.py::test_the_program_gets_what_sdk_v3s_drivers_give_it")),
    Promise(R, "A job with SDK v2's TensorFlow estimator", "Both jobs, and the steps that make `src/` and the data, run as "
            "written in the tests",
            ("tests/sdk/test_readme_on_sagemaker.py::test_the_readme_job_runs_on_sagemaker_with_pipe_mode_a_spot_restart_and_its_metrics",
             "tests/sdk/test_readme_examples.py::test_the_readme_example_fits_the_real_sdk")),
    Promise(R, "The job's role", "under MPI every rank's lines are in algo-1's",
            ("tests/cluster/test_rank_output.py::test_every_line_of_every_rank_on_three_hosts_reaches_the_log_whole_and_once",)),
    # docs/guide.md
    Promise(G, "Pipe mode", "in each epoch each record of a channel reaches exactly one rank of the job that reads it, "
            "every rank the same count",
            ("tests/cluster/test_pipe_dealing.py::test_each_record_reaches_one_rank_of_the_job_an_epoch",
             "tests/process/test_job_dealing.py::test_every_record_reaches_one_rank_of_the_job_an_epoch_in_equal_counts",
             PIPES + "test_ranks_of_one_host_read_every_record_once_per_epoch")),
    Promise(G, "Pipe mode", "a `.shard(hvd.size(), hvd.rank())` or `.shard(len(hosts), host_index)` on a "
            "`PipeModeDataset` is ignored, and the log says so",
            ("tests/process/test_pipemode_dataset.py::test_a_shard_that_train_deals_already_is_ignored_and_said",)),
    Promise(G, "Pipe mode", "Where hosts receive different streams, the master's log says so",
            ("tests/process/test_job_dealing.py::test_hosts_whose_streams_differ_are_said_in_the_masters_log",)),
    Promise(G, "Pipe mode", "`train --dry-run`'s `notes` say how each channel is dealt",
            ("tests/unit/test_plan.py::test_the_dry_run_says_per_pipe_channel_how_its_records_are_dealt",)),
    Promise(G, "Pipe mode", "channels `train_0 ... train_(N-1)` are read by rank g as `train_{g}`",
            (MULTI + "test_aws_per_rank_channels_by_global_rank_on_two_hosts",
             PIPES + "test_aws_per_rank_channels_each_rank_reads_its_own_and_nothing_waits_on_unread_ones")),
    Promise(G, "Pipe mode", "`train` streams them through FIFOs as SageMaker streams Pipe mode, so Pipe-mode scripts run "
            "unchanged there",
            (SDKLOCAL + "test_a_pipemode_script_reads_every_record_once_per_epoch_on_two_ranks_or_one",
             "tests/process/test_local_mode.py::test_an_unchanged_pipemode_script_reads_every_record_once_per_epoch_on_two_ranks")),
    Promise(G, "Pipe mode", "Under Horovod every rank gets FIFOs of its own",
            ("tests/process/test_pipemode_dataset.py::test_each_horovod_rank_reads_its_own_fifos_through_train",)),
    Promise(G, "Pipe mode", "`tfrecord` (default), `recordio`, `lines` (`sagemaker_pipe_record_format`, else the "
            "channel's ContentType",
            (PIPES + "test_formats_over_several_epochs_and_channels", "tests/unit/test_config.py::test_a_pipe_channels_record_format")),
    Promise(G, "Pipe mode", "`SMTRAIN_PIPE_DEALING=host` gives every host's ranks the whole channel instead",
            ("tests/cluster/test_pipe_dealing.py::test_each_record_reaches_one_rank_of_the_job_an_epoch",)),
    Promise(G, "Pipe mode", "With `ShardedByS3Key` the hosts' shares may differ: wrap the batches in `pipes.equal_steps(...)`",
            (MULTI + "test_hosts_with_different_record_counts_take_equal_steps_through_the_helper",)),
    Promise(G, "Checkpoints and spot restarts", "saves a kill cannot tear",
            (CKPT + "test_sigkill_at_random_moments_during_saves_never_tears_a_checkpoint",
             DISK + "test_sigkill_at_random_moments_of_asynchronous_tensorflow_saves_never_leaves_an_unloadable_checkpoint")),
    Promise(G, "Checkpoints and spot restarts", "restores that skip what does not load",
            (DISK + "test_a_checkpoint_whose_restore_raises_is_skipped_for_the_next_older",)),
    Promise(G, "Checkpoints and spot restarts", "a job interrupted mid-epoch resumes there and trains on every record "
            "exactly once",
            (CKPT + "test_pipe_mode_job_stopped_mid_epoch_resumes_with_every_record_once",
             CKPT + "test_shuffled_channel_resumed_mid_epoch_trains_every_record_once",
             MULTI + "test_pipe_job_stopped_mid_epoch_resumes_on_two_hosts")),
    Promise(G, "Checkpoints and spot restarts", "A save that fails (a full disk) raises `CheckpointWriteError` naming "
            "the folder and the free space and publishes nothing",
            (DISK + "test_a_full_disk_fails_the_save_by_name_and_the_next_start_restores_the_newest_good",)),
    Promise(G, "Checkpoints and spot restarts", "it is restored into the checkpoint folder as SageMaker restores a spot "
            "job's",
            ("tests/process/test_local_mode.py::test_a_checkpoints_channel_is_restored_and_the_folder_is_kept_in_the_output_however_the_job_ends",
             SDKLOCAL + "test_a_spot_interruption_is_rehearsed_and_the_second_run_resumes_exactly_once")),
    Promise(G, "Checkpoints and spot restarts", "SIGTERM (a spot interruption, a stop) reaches the script at once on "
            "every host; it has `sagemaker_grace_period_seconds` (110 s) before SIGKILL",
            (MULTI + "test_sigterm_to_every_host", "tests/cluster/test_strategies.py::test_mwms_sigterm_reaches_every_worker",
             "tests/process/test_signals.py::test_program_that_ignores_sigterm_is_killed_after_the_grace_period")),
    Promise(G, "Checkpoints and spot restarts", "`smtrain.callbacks.CheckpointCallback(store, state, every_n_batches=...)`",
            (CKPT + "test_keras_callback_saves_periodically_and_stops_on_sigterm",)),
    Promise(G, "Several hosts", "the workers start sshd, trust only the job's own key, and wait for it",
            ("tests/unit/test_plan.py::test_worker_starts_sshd_as_planned_and_runs_no_program_itself",
             "tests/cluster/test_ssh_trust.py::test_each_job_trusts_its_own_key_only")),
    Promise(G, "Several hosts", "every host runs its task with the `TF_CONFIG` SageMaker's TensorFlow container gives",
            ("tests/process/test_conformance_tf.py::test_tf_config_builders_equal_the_containers",)),
    Promise(G, "Several hosts", "An mpirun option of yours that shapes output (`--tag-output`, `--output-filename`, ...) "
            "gets mpirun's forwarding instead",
            ("tests/unit/test_mpi.py::test_a_user_who_asks_mpirun_for_its_own_output_handling_gets_mpiruns_forwarding",)),
    Promise(G, "Several hosts", "a failing rank or task, a lost host or a stall ends every host at once with the same "
            "exit status, and a reason naming the rank and host",
            (MULTI + "test_a_crashing_rank_on_a_worker_ends_every_host", MULTI + "test_worker_host_dies_mid_job",
             "tests/cluster/test_strategies.py::test_mwms_a_crashing_worker_ends_every_host_naming_it")),
    Promise(G, "Several hosts", "Every variable of the job's `environment=` reaches every rank on every host",
            (MULTI + "test_settings_reach_the_ranks_of_every_host_and_the_rank_contract_does_not",)),
    Promise(G, "Several hosts", "each line whole, once and in its rank's order",
            ("tests/cluster/test_rank_output.py::test_every_line_of_every_rank_on_three_hosts_reaches_the_log_whole_and_once",)),
    Promise(G, "Several hosts", "a host outside them runs the program on its own",
            ("tests/cluster/test_heterogeneous.py::test_the_train_group_trains_on_the_data_groups_batches_and_every_host_ends",
             "tests/process/test_conformance.py::test_a_heterogeneous_mpi_job_runs_on_the_distributions_hosts_as_sagemaker_training_decides")),
    Promise(G, "GPUs and EFA", "runs one rank per GPU by default",
            ("tests/image/test_gpu_image.py::test_dry_run_for_an_8_gpu_efa_instance_plans_8_ranks_a_host_with_the_efa_settings",)),
    Promise(G, "Profiling", "Every job measures itself, with no change to the script, and writes one report when it "
            "ends - also a failed one",
            ("tests/process/test_step_profiler.py::test_a_killed_program_still_gets_its_report_from_what_was_flushed",
             "tests/cluster/test_job_report.py::test_the_masters_report_covers_every_host_and_names_a_slow_rank_on_a_worker")),
    Promise(G, "Profiling", "Past a rank's first 2,000 steps of a mode, one summary every 10 s",
            ("tests/unit/test_step_profiler.py::test_a_million_fast_steps_keep_a_bounded_file_and_every_count",)),
    Promise(G, "While the job runs", "A program's own summaries in the same folder are left alone",
            ("tests/unit/test_live_metrics.py::test_scalars_are_read_back_by_tensorboards_own_loader",
             "tests/cluster/test_live_metrics.py::test_a_running_jobs_metrics_reach_tensorboard_and_its_slow_rank_then_host_is_named")),
    Promise(G, "While the job runs", "says a verdict that held for a quarter of that window, once, and again when it "
            "changes",
            ("tests/unit/test_live_metrics.py::test_the_straggler_verdict_names_the_slow_rank_then_its_host_once_each_and_nobody_on_noise",)),
    Promise(G, "While the job runs", "A host is named where all its ranks are slow and another host's are not",
            ("tests/cluster/test_live_metrics.py::test_a_running_jobs_metrics_reach_tensorboard_and_its_slow_rank_then_host_is_named",)),
    Promise(G, "Restarts in place", "`train` ends the failed attempt's ranks on every host and starts the job again on "
            "the same hosts, up to that many times",
            ("tests/cluster/test_restart.py::test_a_rank_that_raises_once_is_restarted_and_ends_with_the_weights_of_an_uninterrupted_run",
             "tests/cluster/test_restart.py::test_a_rank_killed_once_is_restarted")),
    Promise(G, "Restarts in place", "never after a program that failed before any progress, SageMaker's SIGTERM, or a "
            "failure that repeats at the same step",
            ("tests/unit/test_restart_rule.py::test_a_transient_failure_after_progress_is_restarted_up_to_the_limit",
             "tests/cluster/test_restart.py::test_a_rank_failing_at_the_same_step_every_time_ends_the_job_with_its_cause",
             "tests/cluster/test_restart.py::test_sigterm_while_the_job_restarts_ends_it_at_once")),
    Promise(G, "Restarts in place", "a job that fails in the end names every attempt in `output/failure`",
            ("tests/unit/test_restart_rule.py::test_the_final_reason_names_every_attempt",)),
    Promise(G, "Restarts in place", "Parameter-server jobs are not restarted",
            ("tests/unit/test_restart_rule.py::test_the_plan_restarts_jobs_across_ranks_only_where_a_restart_can_resume_them",)),
    Promise(G, "Profiling", "Keras `fit`, `evaluate` and `predict` (either Keras), custom loops' `tf.function` steps",
            ("tests/process/test_step_profiler.py::test_keras_steps_load_with_smdebug_and_match_what_each_rank_ran",
             "tests/process/test_step_profiler.py::test_custom_loop_steps_are_counted_on_every_rank")),
    Promise(G, "Profiling", "After SIGTERM it writes the tables without the plots",
            ("tests/process/test_monitor.py::test_last_samples_are_on_disk_and_no_monitor_outlives_train",)),
    Promise(G, "While the job runs", "Every 5 s each host's system monitor writes its host's utilisation and each of its "
            "ranks' steps as TensorBoard scalars",
            ("tests/cluster/test_live_metrics.py::test_a_running_jobs_metrics_reach_tensorboard_and_its_slow_rank_then_host_is_named",
             "tests/unit/test_live_metrics.py::test_the_tail_follows_a_ranks_step_recorder_across_its_files")),
    Promise(G, "Restarts in place", "every Pipe channel from FIFO 0 with whole epochs",
            ("tests/cluster/test_restart.py::test_a_pipe_mode_job_restarted_in_place_trains_on_every_record_once",)),
    Promise(G, "Jobs that hang or fail", "ranks that stopped while the others wait for them in a Horovod collective",
            (MULTI + "test_a_plain_horovod_rank_that_stops_on_the_second_host_is_named_on_every_host",
             STALL + "test_a_plain_tf_function_loop_whose_rank_1_stops_names_rank_1_alone",
             MULTI + "test_a_rank_that_hangs_before_hvd_init_is_named")),
    Promise(G, "Jobs that hang or fail", "every start-up wait is bounded (`sagemaker_peer_wait_seconds`)",
            ("tests/cluster/test_strategies.py::test_mwms_master_never_starts",
             "tests/cluster/test_strategies.py::test_mwms_worker_never_starts")),
    Promise(G, "Jobs that hang or fail", "a silent `train` whose ranks' collectives still complete is waited for",
            (MULTI + "test_a_host_whose_train_gets_no_cpu_past_its_limit_stays_in_the_job_while_the_ranks_train",
             "tests/unit/test_liveness.py::test_past_the_limit_a_silent_master_is_waited_for_while_this_hosts_ranks_train")),
    Promise(G, "Jobs that hang or fail", "a host silent for `sagemaker_heartbeat_timeout_seconds` (10 s) whose machine "
            "also stopped answering",
            (MULTI + "test_a_worker_cut_off_then_killed_ends_the_job_on_every_host",
             MULTI + "test_a_host_whose_train_gets_no_cpu_past_its_limit_stays_in_the_job_while_the_ranks_train")),
    Promise(G, "s3:// in TensorFlow", "`tf.io.gfile`, `tf.train.CheckpointManager`, Keras' `ModelCheckpoint` and "
            "`TensorBoard`, `tf.saved_model` and `TFRecordDataset` work on `s3://bucket/key` unchanged",
            ("tests/s3/test_filesystem.py::test_every_gfile_operation_and_tfrecords_over_s3",
             "tests/s3/test_filesystem.py::test_a_keras_job_writes_to_its_s3_model_dir_through_train_and_the_next_job_restores")),
    Promise(G, "s3:// in TensorFlow", "Credentials come from the environment, SageMaker's container endpoint",
            ("tests/s3/test_filesystem.py::test_credentials_from_the_container_endpoint_and_clear_errors_without_any",)),
    Promise(G, "Trust and the job's network", "The image holds no key",
            ("tests/image/test_image.py::test_no_layer_of_the_image_holds_a_private_key",
             "tests/cluster/test_ssh_trust.py::test_each_job_trusts_its_own_key_only")),
    Promise(G, "Trust and the job's network", "The job's ssh settings apply to the job's hosts alone",
            ("tests/unit/test_ssh_trust.py::test_the_jobs_ssh_settings_reach_its_hosts_and_no_other",
             "tests/image/test_image.py::test_the_jobs_ssh_uses_its_key_for_its_hosts_and_the_systems_settings_for_any_other")),
    # docs/reference.md
    Promise(REF, "The program and its arguments", "every hyperparameter not starting with `sagemaker_` becomes `--key "
            "value`",
            ("tests/unit/test_hyperparameters.py::test_cmd_args_sorted_dashes_and_dicts",)),
    Promise(REF, "The program and its arguments", "`.py` runs with the image's Python, `.sh` with bash, anything else "
            "directly",
            (OUTCOME + "test_shell_and_executable_programs",)),
    Promise(REF, "The program and its arguments", "is pip-installed first",
            (OUTCOME + "test_code_from_a_local_tarball_with_requirements",
             "tests/process/test_requirements.py::test_a_warm_pools_second_job_installs_from_the_cache_with_the_index_unreachable")),
    Promise(REF, "The program and its arguments", "`output/intermediate` is synced to S3 while the job runs",
            ("tests/s3/test_intermediate_output.py::test_intermediate_output_reaches_s3_during_the_job_and_all_of_it_by_its_end",)),
    Promise(REF, "The program and its arguments", "On a warm pool the wheels are kept for the pool's next jobs",
            ("tests/process/test_requirements.py::test_a_warm_pools_second_job_installs_from_the_cache_with_the_index_unreachable",)),
    Promise(REF, "The program and its arguments", "from `CA_REPOSITORY_ARN`'s CodeArtifact repository",
            ("tests/unit/test_requirements.py::test_the_codeartifact_index_is_built_as_sagemaker_training_builds_it",)),
    Promise(REF, "Settings", "", ("tests/process/test_bad_input.py::test_a_bad_value_of_a_setting_read_outside_train_ends_the_job_before_the_program_starts",
                                  "tests/process/test_internals.py::test_the_s3_and_pipe_reader_settings_take_effect_in_the_program",
                                  "tests/static/test_docs.py::test_every_setting_the_code_reads_is_documented_and_every_documented_one_is_read")),
    Promise(REF, "What the program gets", "compared with the real sagemaker-training on 13 config trees",
            ("tests/process/test_conformance.py::test_program_sees_what_sagemaker_training_gives",)),
    Promise(REF, "What the program gets", "The program never sees the toolkit's internal variable",
            (MULTI + "test_settings_reach_the_ranks_of_every_host_and_the_rank_contract_does_not",
             "tests/process/test_internals.py::test_every_variable_the_ranks_get_beyond_the_toolkits_and_the_job_is_declared")),
    Promise(REF, "What the program gets", "are shown as `****` in every toolkit log line, the dry-run and "
            "`output/failure`",
            ("tests/process/test_internals.py::test_a_secret_hyperparameter_is_masked_in_toolkit_lines_and_the_failure_file",
             "tests/unit/test_plan.py::test_the_dry_run_plan_masks_secret_values")),
    Promise(REF, "MPI, NCCL and EFA", "any variable you set yourself (`environment=`, the image's, `-x NAME=value`) wins "
            "over the image's default",
            ("tests/unit/test_mpi.py::test_network_variables_the_user_set_win_over_the_images_defaults_and_are_named",
             "tests/unit/test_plan.py::test_the_dry_run_says_which_network_variables_are_the_jobs_own")),
    Promise(REF, "What the program gets", "`TF_CONFIG` for `multi_worker_mirrored_strategy` (every host a `worker`, "
            "port 8890)",
            ("tests/process/test_conformance_tf.py::test_tf_config_builders_equal_the_containers",)),
    Promise(REF, "What the program gets", "A job SDK v3's ModelTrainer started also gets every variable v3's drivers set",
            ("tests/process/test_conformance_modeltrainer.py::test_the_program_gets_what_sdk_v3s_drivers_give_it",)),
    Promise(REF, "MPI, NCCL and EFA", "Binding each rank to its own CPUs happens only on SageMaker instances without GPUs",
            ("tests/unit/test_mpi.py::test_ranks_on_a_cpu_host_are_bound_to_cpus_of_their_own",)),
    Promise(REF, "MPI, NCCL and EFA", "An option of `sagemaker_mpi_custom_mpi_options` that contradicts one",
            ("tests/unit/test_mpi.py::test_a_user_option_that_contradicts_a_default_replaces_it",
             "tests/unit/test_mpi.py::test_a_user_placement_replaces_the_binding_whole")),
    Promise(REF, "Exit statuses and failure reasons", "Every host exits with the job's status; on failure "
            "`output/failure` holds the reason (at most 1 KiB, the cause first)",
            (OUTCOME + "test_exit_status_passes_through", "tests/unit/test_outcome.py::test_failure_text_is_bounded_and_keeps_the_last_whole_lines",
             MULTI + "test_a_crashing_rank_on_a_worker_ends_every_host")),
    Promise(REF, "Horovod's Keras API", "Every name of Horovod's Keras APIs works on tf_keras (`tf.keras`) and on Keras 3",
            ("tests/process/test_horovod_keras_api.py::test_the_inventory_names_every_public_name_with_what_shows_it",)),
    Promise(REF, "Known limitations", "under `mpirun`, `hvd.elastic.run` runs its function once",
            ("tests/process/test_horovod_keras_api.py::test_the_elastic_callbacks_and_run",)),
    # the task pages
    Promise(AWS, "Moving here from AWS's TensorFlow containers and SDK v2's estimator", "runs on this image with one "
            "argument changed: the image",
            ("tests/sdk/test_readme_examples.py::test_the_readme_example_asks_sagemaker_for_what_it_says",
             "tests/process/test_conformance_tf.py::test_program_sees_what_the_tensorflow_container_gives")),
    Promise("docs/from-horovodrun.md", "Moving here from horovodrun", "`environment=` is the job's environment, which "
            "reaches every rank on every host",
            (MULTI + "test_settings_reach_the_ranks_of_every_host_and_the_rank_contract_does_not",
             MULTI + "test_eleven_hosts_listed_as_sagemaker_lists_them_put_every_rank_where_sagemaker_training_does")),
    Promise("docs/from-horovodrun.md", "Moving here from horovodrun", "the processes per host default to the host's GPUs, else 1",
            ("tests/unit/test_mpi.py::test_layout_defaults_to_one_process_per_gpu_else_one",)),
    Promise("docs/from-horovodrun.md", "Moving here from horovodrun", "the workers' sshd listens on port 22 of the job's own network, with keys made for each job",
            ("tests/cluster/test_ssh_trust.py::test_each_job_trusts_its_own_key_only",)),
    Promise("docs/from-horovodrun.md", "Moving here from horovodrun", "SageMaker's interface is chosen for MPI, NCCL and Gloo",
            ("tests/unit/test_mpi.py::test_interface_for_btl_oob_and_nccl",
             "tests/unit/test_mpi.py::test_network_variables_the_user_set_win_over_the_images_defaults_and_are_named")),
    Promise("docs/from-horovodrun.md", "Moving here from horovodrun", "the report reads the timeline",
            ("tests/process/test_step_profiler.py::test_a_healthy_keras_job_trips_no_step_rule_and_reads_the_horovod_timeline",)),
    Promise("docs/from-horovodrun.md", "Moving here from horovodrun", "`--output-filename` in the MPI options gives mpirun's files instead",
            ("tests/unit/test_mpi.py::test_a_user_who_asks_mpirun_for_its_own_output_handling_gets_mpiruns_forwarding",)),
    Promise("docs/from-horovodrun.md", "Moving here from horovodrun", "under `mpirun` `hvd.elastic.run` runs its function once",
            ("tests/process/test_horovod_keras_api.py::test_the_elastic_callbacks_and_run",)),
    Promise("docs/from-horovodrun.md", "Moving here from horovodrun", "`HOROVOD_STALL_CHECK_TIME_SECONDS` is a sixth of `sagemaker_stall_timeout_seconds`, 2 to 10 s, "
            "unless you set it, and a rank the others wait for is named in the job's failure reason",
            ("tests/unit/test_plan.py::test_ranks_get_horovods_stall_inspector_interval_unless_the_user_set_one",
             MULTI + "test_a_plain_horovod_rank_that_stops_on_the_second_host_is_named_on_every_host")),
    Promise(KERAS, "Horovod's Keras API in this image", "This is every public name, what it does on each Keras, and what "
            "refuses what",
            ("tests/process/test_horovod_keras_api.py::test_the_inventory_names_every_public_name_with_what_shows_it",)),
    Promise("docs/from-sdk-v3-drivers.md", "This image and SDK v3's own drivers", "the container's first command is "
            "handed over to `train` instead",
            ("tests/process/test_local_mode.py::test_the_image_hook_turns_modeltrainers_first_bash_into_train_and_nothing_else",
             "tests/process/test_conformance_modeltrainer.py::test_the_program_gets_what_sdk_v3s_drivers_give_it",
             "tests/unit/test_local_mode.py::test_model_trainer_entry_script_and_mpi_become_the_program_and_the_mpi_settings")),
    Promise(EFA, "GPU jobs and EFA", "", ("tests/image/test_gpu_image.py::test_every_shared_library_of_horovod_and_tensorflow_resolves_but_the_driver",)),
    Promise(HANGS, "A job that hangs or fails", "Every host of a failed job exits with the job's status, and "
            "`output/failure`",
            (MULTI + "test_a_crashing_rank_on_a_worker_ends_every_host",
             "tests/cluster/test_strategies.py::test_mwms_a_crashing_worker_ends_every_host_naming_it")),
    Promise(KERAS, "Horovod's Keras API in this image", "Horovod's Keras API takes both, with no setting to change",
            ("tests/process/test_horovod_keras_api.py::test_the_inventory_names_every_public_name_with_what_shows_it",
             MULTI + "test_keras_3_and_tf_keras_models_train_on_2x2_ranks_as_one_process_on_the_union_of_their_batches")),
    Promise(AWS, "The script", "`--model_dir` is still passed",
            ("tests/process/test_conformance_tf.py::test_program_sees_what_the_tensorflow_container_gives",)),
    Promise(AWS, "The script", "Under Horovod each rank reads its own share of the job's records",
            ("tests/cluster/test_pipe_dealing.py::test_each_record_reaches_one_rank_of_the_job_an_epoch",
             "tests/process/test_pipemode_dataset.py::test_a_shard_that_train_deals_already_is_ignored_and_said")),
    Promise(AWS, "The script", "one profiler report per job covering every host and rank",
            ("tests/cluster/test_job_report.py::test_the_masters_report_covers_every_host_and_names_a_slow_rank_on_a_worker",
             MULTI + "test_a_crashing_rank_on_a_worker_ends_every_host")),
    Promise(HANGS, "A job that hangs or fails", "Under MPI every rank's output, tracebacks included, is in the first "
            "host's stream (each line whole)",
            ("tests/cluster/test_rank_output.py::test_every_line_of_every_rank_on_three_hosts_reaches_the_log_whole_and_once",)),
    Promise("docs/from-sdk-v3-drivers.md", "This image and SDK v3's own drivers", "the variables they set for the script, with their values",
            ("tests/process/test_conformance_modeltrainer.py::test_the_program_gets_what_sdk_v3s_drivers_give_it",)),
    Promise("docs/from-sdk-v3-drivers.md", "This image and SDK v3's own drivers", "Hyperparameters become arguments as sagemaker-training makes "
            "them",
            ("tests/process/test_conformance.py::test_program_sees_what_sagemaker_training_gives",)),
    Promise("docs/from-sdk-v3-drivers.md", "This image and SDK v3's own drivers", "`ConfigError`, exit 78, naming `distributed.json`",
            ("tests/unit/test_local_mode.py::test_model_trainer_distributions_the_image_cannot_serve_are_config_errors",)),
    Promise("docs/from-sdk-v3-drivers.md", "This image and SDK v3's own drivers", "TensorFlow's strategies have no v3 class: give the SDK v2 "
            "name as a hyperparameter",
            ("tests/unit/test_local_mode.py::test_model_trainer_with_a_strategy_hyperparameter_runs_multi_worker_mirrored",)),
    Promise("docs/from-sdk-v3-drivers.md", "This image and SDK v3's own drivers", "`environment={\"SMTRAIN_MODELTRAINER_DRIVERS\": \"sdk\"}`",
            ("tests/process/test_local_mode.py::test_the_image_hook_turns_modeltrainers_first_bash_into_train_and_nothing_else",)),
    Promise(AWS, "The script", "`from sagemaker_tensorflow import PipeModeDataset` works unchanged",
            ("tests/process/test_pipemode_dataset.py::test_each_horovod_rank_reads_its_own_fifos_through_train",
             "tests/image/test_image.py::test_tf_container_scripts_find_their_apis_in_the_image")),
    Promise(AWS, "From AWS's TensorFlow 2.21 container", "",
            ("tests/process/test_from_aws_tf221.py::test_a_keras_3_script_from_aws_tf_2_21_container_runs_with_the_documented_switch",)),
    Promise(AWS, "Local mode", "", (SDKLOCAL + "test_a_horovod_job_of_two_instances_and_two_processes_each_runs_through_train",)),
    Promise(EFA, "The GPU flavour", "", ("tests/image/test_gpu_image.py::test_horovod_has_nccl_mpi_and_gloo_and_tensorflow_is_a_cuda_12_build",
                                         "tests/static/test_dockerfile.py::test_the_gpu_flavour_pins_every_cuda_wheel_inside_tensorflow_s_ranges")),
    Promise(EFA, "Running it", "", ("tests/image/test_gpu_image.py::test_dry_run_for_an_8_gpu_efa_instance_plans_8_ranks_a_host_with_the_efa_settings",)),
    Promise(EFA, "EFA", "", ("tests/unit/test_mpi.py::test_efa_instance_without_the_device_gets_no_efa_settings",
                             "tests/process/test_efa_plugin_build.py::test_no_release_builds_nothing_and_a_release_needs_its_checksum")),
    Promise(HANGS, "What each failure reason means", "", ("tests/unit/test_root_cause.py::test_all_consequences_then_earliest",)),
    Promise(HANGS, "Lines of `train`'s log worth knowing", "", (MULTI + "test_a_host_whose_log_stream_backs_up_stays_in_the_job",)),
    Promise(HANGS, "A job that hangs", "", (STALL + "test_a_stalled_program_fails_as_stalled_with_its_stack_logged",)),
    Promise(KERAS, "Moving a tf_keras script to Keras 3", "",
            ("tests/process/test_horovod_keras_api.py::test_the_keras_3_example_trains_with_horovod_on_two_ranks",)),
)

# Sections whose text says how to do something, or where to read on, and promises nothing of the product.
INSTRUCTIONS: tuple[tuple[str, str], ...] = (
    (R, "Quick start"), (R, "1. Build the image"), (R, "2. A training script"), (R, "Next"), (R, "On SageMaker"),
    (R, "Push the image"), (R, "Guides and reference"), (R, "Working on smtrain"),
    (G, "Using smtrain: the guides"), (G, "Settings and SageMaker's own profiling"), (G, "Troubleshooting"),
    (REF, "Reference"), (REF, "Versions"), (AWS, "The estimator"), (EFA, "Extending the image"),
)
