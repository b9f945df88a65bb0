#include "record/discovery/filter_verdicts.h"

#include <algorithm>

#include "host/process.h"
#include "record/scope.h"

namespace allocscope {

FilterVerdicts::FilterVerdicts(const RecordConfig& config, BpfSession& session, CgroupNames& cgroup_names)
    : session_(session),
      cgroup_names_(cgroup_names),
      system_wide_(system_wide(config)),
      members_only_(members_only(config)),
      judge_names_(system_wide_ && !members_only_ && (!config.comm.empty() || !config.unit.empty())) {
  // The front end has checked the expression; one that fails here filters nothing out.
  if (!config.comm.empty())
    if (auto p = Pattern::compile(config.comm)) comm_filter_.emplace(std::move(*p));
  unit_ = config.unit;
}

bool cgroup_in_unit(std::string_view path, std::string_view unit) {
  std::vector<std::string_view> parts = path_components(path);
  return std::ranges::find(parts, unit) != parts.end();
}

Result<void> FilterVerdicts::add_root(uint32_t tgid) {
  roots_.insert(tgid);
  return session_.processes().set_verdict(tgid, AS_PROC_MEMBER);
}

Result<void> FilterVerdicts::follow(uint32_t tgid) {
  return session_.processes().set_verdict(tgid, AS_PROC_MEMBER);
}

bool FilterVerdicts::accept(uint32_t tgid, const std::string& comm, uint64_t cgroup) {
  bool yes = (!comm_filter_ || comm_filter_->found_in(comm)) && (unit_.empty() || in_unit(tgid, cgroup));
  // Every later process of the name (and cgroup) is judged in the kernel,
  // before it sends anything. A cgroup unknown here is not judged so.
  if (judge_names_ && (unit_.empty() || cgroup))
    session_.processes().set_name_verdict(comm, cgroup, yes ? AS_PROC_MEMBER : AS_PROC_IGNORED);
  if (!yes) {
    if (rejected_.size() >= kMaxRemembered) rejected_.clear();  // their losses are then charged
    rejected_.insert(tgid);
  } else {
    rejected_.erase(tgid);
    // Its other threads, whatever their names, are not judged by them.
    if (judge_names_ && !roots_.contains(tgid))
      session_.processes().set_verdict_if_none(tgid, AS_PROC_ACCEPTED);
  }
  return yes;
}

// Judged by the cgroup's path, not its id: a restarted unit gets a new
// cgroup of the same name. The id the sample was taken in names the cgroup
// even when the process is gone by now (short-lived, or allocscope behind);
// a cgroup gone too leaves the process's own record.
bool FilterVerdicts::in_unit(uint32_t tgid, uint64_t cgroup) {
  if (auto it = in_unit_.find(cgroup); cgroup && it != in_unit_.end()) return it->second;
  std::string path = cgroup_names_.path_of(cgroup);
  if (path.empty()) return cgroup_in_unit(read_cgroup_path(pid_t(tgid)), unit_);
  if (in_unit_.size() >= 4096) in_unit_.clear();
  return in_unit_[cgroup] = cgroup_in_unit(path, unit_);
}

void FilterVerdicts::reject(uint32_t tgid) {
  // Spares it the sampled path; a followed process stays followed, to be
  // judged again when it runs another program.
  if (system_wide_ && !roots_.contains(tgid))
    if (!session_.processes().set_verdict(tgid, members_only_ ? AS_PROC_MEMBER_IGNORED : AS_PROC_IGNORED))
      ++verdicts_refused_;  // still sampled by the kernel; its samples are dropped here
}

RejectedLoss FilterVerdicts::rejected_loss() const {
  RejectedLoss l;
  if (!judge_names_) return l;
  for (const auto& [tgid, d] : session_.processes().unjudged_drops())
    if (rejected(tgid)) {
      l.samples += d.samples;
      l.bytes += d.bytes;
    }
  return l;
}

bool FilterVerdicts::judge_name(uint32_t tgid, const std::string& comm) {
  // By name alone: --unit's judgement needs the cgroup of a sample.
  if (!judge_names_ || !unit_.empty()) return false;
  auto judged = judged_names_.find(comm);
  if (judged == judged_names_.end()) {
    if (judged_names_.size() >= kMaxRemembered) judged_names_.clear();
    bool yes = !comm_filter_ || comm_filter_->found_in(comm);
    judged = judged_names_.emplace(comm, yes).first;
    session_.processes().set_name_verdict(comm, 0, yes ? AS_PROC_MEMBER : AS_PROC_IGNORED);
  }
  // A root or a followed child is sampled whatever its name.
  return !judged->second && !roots_.contains(tgid) && !session_.processes().has_verdict(tgid);
}

void FilterVerdicts::unaccept(uint32_t tgid, bool) {
  // The kernel forgot the verdict at exec or exit; one written after that
  // moment is undone here (a new program is judged again).
  if (judge_names_ && !roots_.contains(tgid)) session_.processes().clear_verdict_if(tgid, AS_PROC_ACCEPTED);
}

void FilterVerdicts::unreject(uint32_t tgid, bool exited) {
  // The verdict was written for the program that was sampled; the process
  // has since run another or exited, so whatever the kernel did at that
  // moment is done again here, after the write.
  if (!system_wide_ || roots_.contains(tgid)) return;
  if (!session_.processes().set_verdict(tgid, exited || !members_only_ ? 0 : AS_PROC_MEMBER))
    ++verdicts_refused_;  // its new program is not followed
}

}  // namespace allocscope
