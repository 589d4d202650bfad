// dyn-route serve: the live session-aware frontend (router flags, trace flags) -> serve::Frontend.
#include <memory>

#include "admission_flags.h"
#include "commands.h"
#include "frontend_flags.h"
#include "router_flags.h"

void setup_serve(CLI::App& app, dyn::cli::Dispatch& dispatch) {
  struct Opts {
    dyn::cmd::FrontendFlags front;
    dyn::cmd::RouterFlags router;
    dyn::cmd::AdmissionFlags admission;
    std::vector<std::string> workers;
    std::string binding_store;
    uint64_t seed = 0;
    double health_interval_ms = 1000;
    double health_timeout_ms = 1000;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Live OpenAI/Anthropic-compatible frontend: session-aware routing to workers, request tracing");
  sub->add_option("--worker", o->workers, "Worker base URL (repeat; worker ids 0..N-1 in this order)")
      ->required()
      ->type_name("URL");
  sub->add_option("--seed", o->seed, "Seed of every random routing choice")->capture_default_str();
  sub->add_option("--health-interval-ms", o->health_interval_ms, "Poll each worker's GET /health this often")
      ->capture_default_str()
      ->check(CLI::Range(10.0, 3.6e6));
  sub->add_option("--health-timeout-ms", o->health_timeout_ms, "A /health poll slower than this marks the worker unhealthy")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 3.6e6));
  sub->add_option("--router-binding-store", o->binding_store,
                  "Share session bindings with other serve replicas through Redis at redis://HOST:PORT[/DB]: "
                  "first claim wins, strict affinity across replicas (needs --router-session-affinity-ttl-secs)")
      ->envname("DYN_ROUTER_BINDING_STORE")
      ->type_name("URL")
      ->group("Router");
  o->front.add(*sub, /*trace_always_on=*/false);
  dyn::cmd::add_router_flags(*sub, o->router);
  dyn::cmd::add_admission_flags(*sub, o->admission, /*with_kv_blocks=*/true);
  dispatch.add(sub, [o] {
    o->front.apply(false);
    dyn::serve::FrontendOptions opt = o->front.opt;
    opt.workers = o->workers;
    opt.binding_store = o->binding_store;
    opt.router = o->router.config(o->seed);
    opt.health_interval_ms = o->health_interval_ms;
    opt.health_timeout_ms = o->health_timeout_ms;
    opt.tool_name = "dyn-route";
    opt.admission = dyn::cmd::admission_config(o->admission);
    // SPEC 9 capacity: the workers' KV blocks (SPEC 8 default 16,384) x the router block size.
    opt.admission_capacity_tokens = (o->admission.kv_blocks ? o->admission.kv_blocks : 16384) *
                                    static_cast<uint64_t>(opt.router.block_size);
    return dyn::cmd::run_frontend(opt);
  });
}
