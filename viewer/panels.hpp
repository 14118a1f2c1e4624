// The panels of the main window; each draws from and acts on the shared ViewerState.
#pragma once
#include "viewer/viewer_state.hpp"

namespace lab::viewer {

void draw_kernels_panel(ViewerState& s);
void draw_run_panel(ViewerState& s);
void draw_pipeline_panel(ViewerState& s);
void draw_train_panel(ViewerState& s);

}  // namespace lab::viewer
