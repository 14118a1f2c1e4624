// What the Train panel's controls and the scripts do: edit the training request, start / pause / resume /
// stop the run, ask for the assignment view; and the per-frame copy of the session's progress into the
// panel's state (with the plot series made from it). Bad settings throw UsageError naming the setting.
#pragma once
#include <string>

#include "viewer/viewer_state.hpp"

namespace lab::viewer {

// NAME: data, model, epochs, batch, imgsz, nbs, backend, project (the runs folder), every (iterations between
// assignment refreshes).
void set_train_setting(ViewerState& s, const std::string& name, const std::string& value);
void start_training(ViewerState& s);
void pause_training(ViewerState& s);
void resume_training(ViewerState& s);
void stop_training(ViewerState& s);
void refresh_assignment(ViewerState& s);

// Copies the session's progress when it changed; called once per frame.
void poll_training(ViewerState& s);
// For scripts: a stop or pause not yet in effect, a wait_steps not yet reached, an assignment asked for and
// not made.
bool training_busy(const ViewerState& s);

}  // namespace lab::viewer
