#include "host/discover.hpp"

#include <fmt/format.h>
#include <hwloc.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>

#include "common/cpulist.hpp"
#include "common/text.hpp"
#include "host/cpu_identity.hpp"
#include "host/xml_input.hpp"

namespace epyctune::host {

namespace {

struct TopoDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopoPtr = std::unique_ptr<hwloc_topology, TopoDeleter>;

// HWLOC_FSROOT is read from the environment when the Linux component is
// instantiated; the environment is process-wide, so loads are serialized and
// the previous value restored.
std::mutex g_env_mutex;

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::optional<std::string>& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value->c_str(), 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::vector<int> bitmap_to_vector(hwloc_const_bitmap_t b) {
  std::vector<int> out;
  if (!b || hwloc_bitmap_iszero(b)) return out;
  // An XML can claim any set; a CPU list longer than any kernel allows is
  // not a machine.
  if (hwloc_bitmap_weight(b) < 0 || hwloc_bitmap_last(b) >= common::kMaxCpusOffline)
    throw DiscoveryError(fmt::format("the topology names CPU ids beyond {} (the kernel's limit)",
                                     common::kMaxCpusOffline - 1));
  int i;
  hwloc_bitmap_foreach_begin(i, b) out.push_back(i);
  hwloc_bitmap_foreach_end();
  return out;
}

std::string info(hwloc_obj_t obj, const char* name) {
  for (; obj; obj = obj->parent)
    if (const char* v = hwloc_obj_get_info_by_name(obj, name)) return v;
  return "";
}

TopoPtr new_topology() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throw DiscoveryError("hwloc_topology_init failed");
  TopoPtr topo(raw);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  return topo;
}

[[noreturn]] void refused(const std::string& name, const std::string& said) {
  throw DiscoveryError(fmt::format(
      "cannot load topology XML {}: hwloc {} refused it ({}); give an lstopo XML export "
      "(lstopo --of xml FILE.xml) from hwloc 2.x, or `lstopo --of v2xml FILE.xml` with hwloc 3",
      name, HWLOC_VERSION, said.empty() ? "it gave no reason" : "it said: " + said.substr(0, 600)));
}

// An lstopo export held in memory (read once, with the input-file checks);
// `name` is what messages call it.
TopoPtr load_xml(const std::string& xml, const std::string& name) {
  if (auto why = detail::xml_format_problem(xml); !why.empty())
    throw DiscoveryError(fmt::format("cannot load topology XML {}: {}", name, why));
  auto trial = detail::try_import(xml);
  if (!trial.crashed.empty())
    throw DiscoveryError(
        fmt::format("cannot load topology XML {}: {}; give an lstopo XML export "
                    "(lstopo --of xml FILE.xml)",
                    name, trial.crashed));
  if (!trial.loads) refused(name, trial.said);
  TopoPtr topo = new_topology();
  std::lock_guard lock(g_env_mutex);
  ScopedEnv env_xml("HWLOC_XMLFILE", std::nullopt);
  std::string said;
  int rc = detail::capture_hwloc_messages(
      [&] {
        if (hwloc_topology_set_xmlbuffer(topo.get(), xml.data(), static_cast<int>(xml.size())) != 0)
          return -1;
        return hwloc_topology_load(topo.get());
      },
      said);
  if (rc != 0) refused(name, said);
  return topo;
}

TopoPtr load(const Sysroot& root, const DiscoverOptions& opt, std::string& source) {
  if (!opt.topology_xml.empty()) {
    source = "xml:" + opt.topology_xml;
    return load_xml(detail::read_topology_xml(opt.topology_xml), opt.topology_xml);
  }
  TopoPtr topo = new_topology();
  hwloc_topology_t raw = topo.get();
  std::lock_guard lock(g_env_mutex);
  std::optional<std::string> fsroot;
  if (!root.is_live()) {
    source = "sysroot:" + root.root().string();
    if (!root.is_dir("/sys/devices/system/cpu"))
      throw DiscoveryError(
          fmt::format("{}: no sys/devices/system/cpu: not a host tree (make one "
                      "with: epyctune fixture create)",
                      root.root().string()));
    fsroot = root.root().string();
    // The x86 backend would add the CPUID of the machine we run on.
    hwloc_topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
  } else {
    source = "live";
  }
  ScopedEnv env_root("HWLOC_FSROOT", fsroot);
  ScopedEnv env_xml("HWLOC_XMLFILE", std::nullopt);
  if (hwloc_topology_load(raw) != 0)
    throw DiscoveryError(fmt::format("hwloc could not load the topology from {}", source));
  return topo;
}

// Every object of a type, in logical order. An imported XML can put one type
// at several depths (hwloc then answers -1 and no object by index); epyctune
// reads each concept at one level, so that is refused, never guessed at.
std::vector<hwloc_obj_t> objects_of(hwloc_topology_t h, hwloc_obj_type_t type, const char* what,
                                    const std::string& name) {
  int n = hwloc_get_nbobjs_by_type(h, type);
  if (n < 0)
    throw DiscoveryError(fmt::format(
        "cannot read topology {}: it puts {} at more than one level of the hierarchy; give an "
        "lstopo XML export of a real host (lstopo --of xml FILE.xml)",
        name, what));
  std::vector<hwloc_obj_t> out;
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(h, type, static_cast<unsigned>(i));
    if (!o)
      throw DiscoveryError(
          fmt::format("cannot read topology {}: hwloc lists {} {} but not #{}", name, n, what, i));
    out.push_back(o);
  }
  return out;
}

// Everything but the CPU identity, from a loaded hwloc topology; `name` is
// what messages call its source.
Topology build(hwloc_topology_t h, const std::string& name) {
  Topology t;

  t.online_cpus = bitmap_to_vector(hwloc_topology_get_topology_cpuset(h));
  const auto packages = objects_of(h, HWLOC_OBJ_PACKAGE, "packages", name);
  t.sockets = std::max(static_cast<int>(packages.size()), 1);
  auto socket_of = [&](hwloc_obj_t o) {
    hwloc_obj_t p = hwloc_get_ancestor_obj_by_type(h, HWLOC_OBJ_PACKAGE, o);
    return p ? static_cast<int>(p->logical_index) : 0;
  };

  // NUMA nodes (memory from sysfs nodeN/meminfo through hwloc).
  for (hwloc_obj_t n : objects_of(h, HWLOC_OBJ_NUMANODE, "NUMA nodes", name)) {
    NumaNode node;
    node.os_index = static_cast<int>(n->os_index);
    node.memory_bytes = n->attr ? n->attr->numanode.local_memory : 0;
    node.cpus = bitmap_to_vector(n->cpuset);
    node.socket = -1;
    // A node may span sockets (AMD's NPS0, or an export with no NUMA
    // information): every socket its CPUs are on.
    std::set<int> sockets;
    for (int cpu : node.cpus) {
      hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(h, static_cast<unsigned>(cpu));
      sockets.insert(pu ? socket_of(pu) : 0);
    }
    node.sockets.assign(sockets.begin(), sockets.end());
    if (!node.sockets.empty()) node.socket = node.sockets.front();
    t.numa_nodes.push_back(node);
  }
  std::sort(t.numa_nodes.begin(), t.numa_nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.os_index < b.os_index; });

  // L3 domains in logical order; a host without L3 gets one per package.
  // The root stands in for a machine with neither (an XML's root need not be
  // typed Machine).
  auto domains = objects_of(h, HWLOC_OBJ_L3CACHE, "L3 caches", name);
  hwloc_obj_type_t l3_type = HWLOC_OBJ_L3CACHE;
  if (domains.empty()) {
    domains = packages;
    l3_type = HWLOC_OBJ_PACKAGE;
  }
  if (domains.empty()) {
    domains = {hwloc_get_root_obj(h)};
    l3_type = HWLOC_OBJ_MACHINE;
  }
  std::map<unsigned, int> dom_of_gp;  // hwloc gp_index -> our L3 index
  for (int i = 0; i < static_cast<int>(domains.size()); ++i) {
    hwloc_obj_t o = domains[static_cast<size_t>(i)];
    L3Domain d;
    d.index = i;
    d.synthetic = l3_type != HWLOC_OBJ_L3CACHE;
    d.cache_id = o->os_index == HWLOC_UNKNOWN_INDEX ? i : static_cast<int>(o->os_index);
    d.size_bytes = d.synthetic ? 0 : o->attr->cache.size;
    d.socket = l3_type == HWLOC_OBJ_MACHINE ? 0 : socket_of(o);
    d.cpus = bitmap_to_vector(o->cpuset);
    d.numa_node =
        o->nodeset && !hwloc_bitmap_iszero(o->nodeset) ? hwloc_bitmap_first(o->nodeset) : 0;
    dom_of_gp[static_cast<unsigned>(o->gp_index)] = i;
    t.l3_domains.push_back(d);
  }

  const auto cores = objects_of(h, HWLOC_OBJ_CORE, "cores", name);
  for (size_t i = 0; i < cores.size(); ++i) {
    hwloc_obj_t o = cores[i];
    Core c;
    c.id = static_cast<int>(i);
    c.socket = socket_of(o);
    c.cpus = bitmap_to_vector(o->cpuset);
    c.numa_node =
        o->nodeset && !hwloc_bitmap_iszero(o->nodeset) ? hwloc_bitmap_first(o->nodeset) : 0;
    hwloc_obj_t dom = l3_type == HWLOC_OBJ_MACHINE ? hwloc_get_root_obj(h)
                                                   : hwloc_get_ancestor_obj_by_type(h, l3_type, o);
    c.l3 = dom ? dom_of_gp[static_cast<unsigned>(dom->gp_index)] : 0;
    t.l3_domains[static_cast<size_t>(c.l3)].cores.push_back(c.id);
    t.threads_per_core = std::max<int>(t.threads_per_core, static_cast<int>(c.cpus.size()));
    t.cores.push_back(std::move(c));
  }

  return t;
}

// The XML carries what its exporter saw of the CPU.
CpuIdentity identity_from_xml(hwloc_topology_t h) {
  hwloc_obj_t pkg = hwloc_get_nbobjs_by_type(h, HWLOC_OBJ_PACKAGE) > 0
                        ? hwloc_get_obj_by_type(h, HWLOC_OBJ_PACKAGE, 0)
                        : hwloc_get_root_obj(h);
  return identity_from_hwloc_infos(info(pkg, "CPUVendor"), info(pkg, "CPUFamilyNumber"),
                                   info(pkg, "CPUModelNumber"), info(pkg, "CPUStepping"),
                                   info(pkg, "CPUModel"));
}

}  // namespace

Topology discover(const Sysroot& root, const DiscoverOptions& opt) {
  std::string source;
  TopoPtr topo = load(root, opt, source);
  Topology t = build(topo.get(), source);
  t.source = common::valid_utf8(source);
  t.cpu = opt.topology_xml.empty() ? identify_cpu(root) : identity_from_xml(topo.get());
  return t;
}

Topology discover_xml_text(const std::string& xml, const std::string& name) {
  TopoPtr topo = load_xml(xml, name);
  Topology t = build(topo.get(), name);
  t.source = common::valid_utf8("xml:" + name);
  t.cpu = identity_from_xml(topo.get());
  return t;
}

int Topology::nodes_per_socket() const {
  int with_cpus = 0;
  for (const auto& n : numa_nodes)
    if (!n.cpus.empty()) ++with_cpus;
  for (const auto& n : numa_nodes)
    if (n.sockets.size() > 1) return 0;  // one node over several sockets: NPS0
  return std::max(1, sockets > 0 ? with_cpus / sockets : with_cpus);
}

bool NumaNode::on_socket(int s) const {
  return std::find(sockets.begin(), sockets.end(), s) != sockets.end();
}

const NumaNode* Topology::node(int os_index) const {
  for (const auto& n : numa_nodes)
    if (n.os_index == os_index) return &n;
  return nullptr;
}

std::vector<int> Topology::cpus_of_socket(int socket) const {
  std::vector<int> out;
  for (const auto& c : cores)
    if (c.socket == socket) out.insert(out.end(), c.cpus.begin(), c.cpus.end());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace epyctune::host
