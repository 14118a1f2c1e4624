// Window, ImGui set-up, the main window with its panel tabs and status line, and the frame loop.
#define GLFW_INCLUDE_NONE
#include "viewer/app.hpp"

#include <GL/gl.h>
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>

#include <iostream>
#include <memory>
#include <optional>

#include "harness/context.hpp"
#include "nvrtc_runtime/errors.hpp"
#include "viewer/fonts.hpp"
#include "viewer/panels.hpp"
#include "viewer/script.hpp"
#include "viewer/ui_text.hpp"
#include "viewer/viewer_actions.hpp"

namespace lab::viewer {

namespace {

void glfw_error(int code, const char* text) {
  std::cerr << "lab-viewer: GLFW error " << code << ": " << text << "\n";
}

void init_state(ViewerState& s, const ViewerOptions& o) {
  s.workspace = open_workspace(o.kernels_dir, o.cache_dir);
  s.backends = available_backends();
  s.settings_file = config_dir(o.config_dir) / "viewer.json";
  s.settings = load_settings(s.settings_file);
  s.kernels.auto_compile = s.settings.auto_compile;
  s.run.backend = s.settings.backend;
  if (std::find(s.backends.begin(), s.backends.end(), s.run.backend) == s.backends.end())
    s.run.backend = s.backends.front();
  s.scenarios_dir = ContextOptions{}.scenarios_directory();
  s.scenarios = load_scenario_dir(s.scenarios_dir, s.scenario_errors);
  s.pipeline.executor = s.run.backend;
  s.pipeline.confidence = s.settings.confidence;
  s.train.request.backend = s.run.backend;
}

// A file dropped on the window: opened in the Pipeline panel.
void on_drop(GLFWwindow* window, int count, const char** paths) {
  auto* s = static_cast<ViewerState*>(glfwGetWindowUserPointer(window));
  if (count < 1) return;
  try {
    open_image(*s, paths[0]);
    s->panel_request = "Pipeline";
    s->message.clear();
  } catch (const std::exception& e) {
    s->message = e.what();
  }
}

void open_first_kernel(ViewerState& s, const ViewerOptions& o) {
  if (!o.kernel.empty()) {
    open_kernel(s, o.kernel);  // a bad --kernel is a usage error
    return;
  }
  if (o.script.empty() && !s.settings.last_image.empty()) {
    try {
      open_image(s, s.settings.last_image);
    } catch (const std::exception&) {
      s.settings.last_image.clear();  // moved or deleted since
    }
  }
  if (o.script.empty() && !s.settings.last_kernel.empty()) {
    try {
      open_kernel(s, s.settings.last_kernel, s.settings.last_variant);
    } catch (const std::exception&) {
      s.settings.last_kernel.clear();  // a kernel that no longer exists: start with none
    }
  }
}

void draw_main_window(ViewerState& s) {
  const ImGuiViewport* vp = ImGui::GetMainViewport();
  ImGui::SetNextWindowPos(vp->WorkPos);
  ImGui::SetNextWindowSize(vp->WorkSize);
  ImGui::Begin("YOLO26 Kernel Lab", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoSavedSettings |
                   ImGuiWindowFlags_NoBringToFrontOnFocus);
  const float status_h = ImGui::GetFrameHeightWithSpacing();
  ImGui::BeginChild("panels", ImVec2(0, -status_h), false);
  if (ImGui::BeginTabBar("panel tabs")) {
    const auto panel = [&](const char* name, void (*draw)(ViewerState&)) {
      const bool request = s.panel_request == name;
      if (ImGui::BeginTabItem(name, nullptr, request ? ImGuiTabItemFlags_SetSelected : 0)) {
        ui_record(std::string("panel: ") + name);
        draw(s);
        ImGui::EndTabItem();
      }
      if (request) s.panel_request.clear();
    };
    panel("Kernels", draw_kernels_panel);
    panel("Run", draw_run_panel);
    panel("Pipeline", draw_pipeline_panel);
    panel("Train", draw_train_panel);
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
  ImGui::Separator();
  if (!s.message.empty())
    ui_text_coloured(ImVec4(1, 0.4f, 0.4f, 1), s.message);
  else
    ImGui::TextDisabled("backends here: %s%s | kernel tree: %s | cache: %s", s.backends.front().c_str(),
                        s.backends.size() > 1 ? ", cpu" : "", s.workspace.dir.c_str(),
                        s.workspace.context.cache->root().c_str());
  ImGui::End();
}

}  // namespace

int run_viewer(const ViewerOptions& o) {
  std::optional<ScriptRunner> script;
  if (!o.script.empty())
    script.emplace(o.script, parse_script(o.script), o.screenshot_dir.empty() ? "." : o.screenshot_dir);
  ViewerState s;
  init_state(s, o);
  open_first_kernel(s, o);

  glfwSetErrorCallback(glfw_error);
  if (!glfwInit()) throw RuntimeError("cannot initialise GLFW (no display? set DISPLAY or use xvfb-run)");
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 0);
  if (script) glfwWindowHint(GLFW_RESIZABLE, GLFW_FALSE);
  GLFWwindow* window = glfwCreateWindow(o.width, o.height, "YOLO26 Kernel Lab", nullptr, nullptr);
  if (!window) {
    glfwTerminate();
    throw RuntimeError("cannot create an OpenGL 3 window");
  }
  glfwMakeContextCurrent(window);
  glfwSetWindowUserPointer(window, &s);
  glfwSetDropCallback(window, on_drop);
  glfwSwapInterval(script ? 0 : 1);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  const std::string ini = (config_dir(o.config_dir) / "viewer_imgui.ini").string();
  io.IniFilename = script ? nullptr : ini.c_str();  // scripts get the same layout every time
  ImGui::StyleColorsDark();
  load_fonts();
  ImGui_ImplGlfw_InitForOpenGL(window, true);
  ImGui_ImplOpenGL3_Init("#version 130");

  while (!glfwWindowShouldClose(window)) {
    glfwPollEvents();
    ui_text_new_frame();
    if (script) {
      script->step(s);
      if (script->finished()) break;
    }
    poll_jobs(s, glfwGetTime());
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    draw_main_window(s);
    ImGui::Render();
    int fb_w = 0, fb_h = 0;
    glfwGetFramebufferSize(window, &fb_w, &fb_h);
    glViewport(0, 0, fb_w, fb_h);
    glClearColor(0.1f, 0.1f, 0.12f, 1.0f);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    if (script) script->after_render(s, fb_w, fb_h);
    glfwSwapBuffers(window);
  }

  save_settings(s.settings_file, s.settings);
  ImGui_ImplOpenGL3_Shutdown();
  ImGui_ImplGlfw_Shutdown();
  ImGui::DestroyContext();
  glfwDestroyWindow(window);
  glfwTerminate();
  return script ? script->exit_code() : 0;
}

}  // namespace lab::viewer
