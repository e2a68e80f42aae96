// Trainer's side of holds and failures (trainer.h): waiting before a step
// while the chief pauses the run or writes a checkpoint, asking the chief
// where to go on after a peer failed, and a collective restore that failed
// for want of a peer.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "chief/membership.h"
#include "common/process.h"
#include "common/retry.h"
#include "common/status_macros.h"
#include "worker/trainer.h"

namespace pstrain {
namespace worker {

absl::Status Trainer::WaitUntilMayStart(int64_t step) {
  bool held = false;
  while (true) {
    absl::StatusOr<HeartbeatResponse> beat = chief_->Heartbeat(step);
    if (!beat.ok()) return AtStep(step, "heartbeat", ChiefFailure(beat.status()));
    if (beat->phase() == PHASE_FAILED) return RunFailed(step);
    if (beat->generation() != generation_) {
      return absl::AbortedError(absl::StrCat(
          "step ", step, ": the chief restored the run (generation ",
          beat->generation(), ")"));
    }
    if (chief::IsAbsent(beat->membership(), options_.worker_index)) {
      return absl::AbortedError(absl::StrCat(
          "step ", step, ": the chief presumed this worker dead and the "
          "others train its share"));
    }
    membership_ = beat->membership();
    const bool hold = beat->phase() == PHASE_PAUSED ||
                      (beat->pause_at_step() != 0 && beat->pause_at_step() == step);
    if (!hold) {
      if (held) {
        LogInfo(absl::StrCat("worker ", options_.worker_index,
                             ": going on at step ", step));
      }
      return absl::OkStatus();
    }
    if (!held) {
      LogInfo(absl::StrCat("worker ", options_.worker_index,
                           ": holding at step ", step,
                           beat->pause_at_step() == step ? " for a checkpoint"
                                                         : " (run paused)"));
      held = true;
      if (beat->pause_at_step() == step &&
          options_.save_checkpoint != nullptr) {
        // The replica is at `step`: every earlier step is applied.
        PSTRAIN_RETURN_IF_ERROR(AtStep(step, "writing a checkpoint",
                                       options_.save_checkpoint(step)));
      }
    }
    absl::SleepFor(options_.pause_poll);
  }
}

absl::StatusOr<Trainer::Position> Trainer::Resync(const Position& at,
                                                  const data::RunLength& length,
                                                  bool done) {
  absl::Time last_answer = absl::Now();
  const absl::Time waiting_since = last_answer;
  bool was_absent = false;
  for (int tries = 1;; ++tries) {
    absl::StatusOr<HeartbeatResponse> beat = chief_->Heartbeat(-1);
    // What the liveness heartbeats heard may be all the chief says.
    if (!beat.ok() && heard_phase_ == PHASE_FINISHED) {
      return Position{length.total_steps, at.generation, /*over=*/true};
    }
    if (!beat.ok() && heard_phase_ == PHASE_FAILED) return RunFailed(at.step);
    if (beat.ok()) {
      last_answer = absl::Now();
      if (beat->phase() == PHASE_FAILED) return RunFailed(at.step);
      if (beat->phase() == PHASE_FINISHED) {
        return Position{length.total_steps, at.generation, /*over=*/true};
      }
      if (chief::IsAbsent(beat->membership(), options_.worker_index)) {
        // Presumed dead: registering again has the chief take it back.
        if (!was_absent) {
          PSTRAIN_RETURN_IF_ERROR(
              chief_->Register(options_.chief_patience).status());
          was_absent = true;
        }
      } else if (was_absent) {
        PSTRAIN_ASSIGN_OR_RETURN(TrainingState state,
                                 chief_->GetTrainingState());
        return Position{state.start_step(), state.generation()};
      } else if (beat->phase() == PHASE_TRAINING) {
        if (beat->generation() != at.generation) {
          return Position{beat->resume_step(), beat->generation()};
        }
        // A worker that is done waits while the others train. A collective
        // run's replicas may differ after a failed step (one worker's
        // all-reduce completed, another's did not): it goes on only from a
        // restore, once the chief has recovered the run.
        if (!done && options_.restore == nullptr) return at;
        if (!done && absl::Now() - waiting_since > options_.chief_patience) {
          return AtStep(at.step,
                        "the chief did not restore the collective run within " +
                            absl::FormatDuration(options_.chief_patience),
                        absl::UnavailableError("a step failed"));
        }
      }
    } else if (absl::IsNotFound(beat.status())) {
      // The chief restarted: join it again; it restores the run and says
      // where to go on once every task is back.
      LogInfo(absl::StrCat("worker ", options_.worker_index, ": ",
                           beat.status().message()));
      PSTRAIN_RETURN_IF_ERROR(
          chief_->Register(options_.chief_patience).status());
      last_answer = absl::Now();
    } else if (!IsPeerFailure(beat.status())) {
      return AtStep(at.step, "asking the chief", beat.status());
    } else if (absl::Now() - last_answer > options_.chief_patience) {
      return AtStep(at.step, "the chief did not answer for " +
                                 absl::FormatDuration(options_.chief_patience),
                    beat.status());
    }
    absl::Duration wait = Backoff(options_.resync_backoff, std::min(tries, 5));
    // A worker that is done hears the run's end about as soon as the chief's
    // liveness checks would.
    if (done) wait = std::min(wait, options_.liveness_interval);
    absl::SleepFor(std::max(options_.pause_poll, wait));
  }
}

absl::Status Trainer::Restore(const Position& at, bool* wait) {
  const absl::Status status = options_.restore(at.step, at.generation);
  if (!IsPeerFailure(status)) return status;
  LogInfo(absl::StrCat("worker ", options_.worker_index, ": restoring step ",
                       at.step, " (generation ", at.generation, ") failed: ",
                       status.message(), "; asking the chief how to go on"));
  if (options_.metrics != nullptr) options_.metrics->resyncs->Increment();
  *wait = true;
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace pstrain
