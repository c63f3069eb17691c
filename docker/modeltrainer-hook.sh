# shellcheck shell=bash
# Sourced by every non-interactive bash in the image (BASH_ENV). SDK v3's ModelTrainer, given
# `source_code`, starts the container as
#   /bin/bash -c "chmod +x /opt/ml/input/data/sm_drivers/sm_train.sh && /opt/ml/input/data/sm_drivers/sm_train.sh"
# which would run the SDK's own drivers (its sshd, mpirun and paramiko) instead of this image's `train`.
# That one bash - the container's first process - becomes `train`, which reads what ModelTrainer wrote
# (smtrain/config/modeltrainer.py) and runs the job with all of its guarantees. Every other bash goes on
# untouched. SMTRAIN_MODELTRAINER_DRIVERS=sdk keeps the SDK's drivers.
if [ "$$" = 1 ] && [ "${SMTRAIN_MODELTRAINER_DRIVERS:-train}" != sdk ]; then
  case "${BASH_EXECUTION_STRING:-}" in
    */opt/ml/input/data/sm_drivers/sm_train.sh*) unset BASH_ENV; exec train ;;
  esac
fi
