/* See got_slots.h. */
#define _GNU_SOURCE
#include "preload/got_slots.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>

struct taken_slot {
  uint64_t *slot;
  uint64_t original, ours;
  uint64_t module; /* its module's dynamic section: a module unloaded since is not written */
};
static struct taken_slot taken[AS_MAX_SLOTS];
static uint32_t taken_count;
static uint64_t visited[AS_MAX_MODULES];
static uint32_t visited_count;
static unsigned long long loads_seen; /* dlpi_adds at the last visit */
static int walk_lock;

static void lock(void) {
  while (__atomic_exchange_n(&walk_lock, 1, __ATOMIC_ACQUIRE)) __builtin_ia32_pause();
}
static void unlock(void) { __atomic_store_n(&walk_lock, 0, __ATOMIC_RELEASE); }

/* A module's dynamic section and what it says. glibc rewrites the
 * section's addresses to run-time ones where it can write it; the vDSO's
 * and a read-only section's are file addresses. */
struct module {
  uint64_t bias, dynamic, lo, hi; /* hi: end of its last segment */
  uint64_t relro_lo, relro_hi;    /* the pages the loader made read-only */
  const Elf64_Sym *symtab;
  const char *strtab;
  const Elf64_Rela *rela, *jmprel;
  uint64_t rela_bytes, jmprel_bytes;
};

static uint64_t run_address(const struct module *m, uint64_t v) { return v < m->bias ? v + m->bias : v; }

static int read_module(const struct dl_phdr_info *info, struct module *m) {
  memset(m, 0, sizeof *m);
  m->bias = info->dlpi_addr;
  m->lo = UINT64_MAX;
  uint64_t page = getauxval(AT_PAGESZ);
  if (!page) page = 4096;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *p = &info->dlpi_phdr[i];
    if (p->p_type == PT_DYNAMIC) m->dynamic = m->bias + p->p_vaddr;
    if (p->p_type == PT_GNU_RELRO) {
      m->relro_lo = (m->bias + p->p_vaddr) & ~(page - 1);
      m->relro_hi = (m->bias + p->p_vaddr + p->p_memsz) & ~(page - 1);
    }
    if (p->p_type == PT_LOAD) {
      if (m->bias + p->p_vaddr < m->lo) m->lo = m->bias + p->p_vaddr;
      if (m->bias + p->p_vaddr + p->p_memsz > m->hi) m->hi = m->bias + p->p_vaddr + p->p_memsz;
    }
  }
  if (!m->dynamic) return 0;
  for (const Elf64_Dyn *d = (const Elf64_Dyn *)(uintptr_t)m->dynamic; d->d_tag != DT_NULL; d++) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        m->symtab = (const Elf64_Sym *)(uintptr_t)run_address(m, d->d_un.d_ptr);
        break;
      case DT_STRTAB:
        m->strtab = (const char *)(uintptr_t)run_address(m, d->d_un.d_ptr);
        break;
      case DT_RELA:
        m->rela = (const Elf64_Rela *)(uintptr_t)run_address(m, d->d_un.d_ptr);
        break;
      case DT_RELASZ:
        m->rela_bytes = d->d_un.d_val;
        break;
      case DT_JMPREL:
        m->jmprel = (const Elf64_Rela *)(uintptr_t)run_address(m, d->d_un.d_ptr);
        break;
      case DT_PLTRELSZ:
        m->jmprel_bytes = d->d_un.d_val;
        break;
      case DT_PLTREL:
        if (d->d_un.d_val != DT_RELA) return 0;
        break;
    }
  }
  return m->symtab && m->strtab;
}

static int seen(uint64_t dynamic) {
  for (uint32_t i = 0; i < visited_count; i++)
    if (visited[i] == dynamic) return 1;
  return 0;
}

static const struct as_wrapped_fn *wrapped(const struct as_wrapped_fn *fns, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(fns[i].name, name) == 0) return &fns[i];
  return NULL;
}

struct walk {
  const struct as_wrapped_fn *fns;
  int n;
  uint64_t own_base;
  struct as_slot_counts *counts;
};

/* One module's relocations of one table: the slots to take, into `out`. */
static uint32_t slots_of(const struct module *m, const Elf64_Rela *r, uint64_t bytes, const struct walk *w,
                         struct taken_slot *out, uint32_t room) {
  uint32_t found = 0;
  for (uint64_t i = 0; r && i < bytes / sizeof *r; i++) {
    uint32_t type = ELF64_R_TYPE(r[i].r_info);
    if (type != R_X86_64_GLOB_DAT && type != R_X86_64_JUMP_SLOT) continue;
    const Elf64_Sym *sym = &m->symtab[ELF64_R_SYM(r[i].r_info)];
    const struct as_wrapped_fn *f = wrapped(w->fns, w->n, m->strtab + sym->st_name);
    if (!f) continue;
    uint64_t *slot = (uint64_t *)(uintptr_t)(m->bias + r[i].r_offset);
    uint64_t now = __atomic_load_n(slot, __ATOMIC_ACQUIRE), ours = (uint64_t)(uintptr_t)f->ours;
    if (now == ours) continue;
    int bound_here =
        f->global && (now == (uint64_t)(uintptr_t)f->global || now == (uint64_t)(uintptr_t)f->canonical);
    /* Not yet bound (lazy): the module's own PLT, which is not the module's
     * own definition of the name (a module bound to that is not the
     * program's). */
    int lazy_stub = type == R_X86_64_JUMP_SLOT && now >= m->lo && now < m->hi &&
                    (sym->st_shndx == SHN_UNDEF || now != m->bias + sym->st_value);
    if (!bound_here && !lazy_stub) {
      w->counts->elsewhere++;
      continue;
    }
    if (found == room) {
      w->counts->full++;
      continue;
    }
    out[found++] = (struct taken_slot){slot, now, ours, m->dynamic};
  }
  return found;
}

static int in_relro(const struct module *m, const uint64_t *slot) {
  return (uint64_t)(uintptr_t)slot >= m->relro_lo && (uint64_t)(uintptr_t)slot < m->relro_hi;
}

/* Writes the found slots: the read-only pages opened for the time of it. */
static uint32_t write_slots(const struct module *m, struct taken_slot *s, uint32_t n) {
  int relro = 0;
  for (uint32_t i = 0; i < n; i++) relro |= in_relro(m, s[i].slot);
  void *relro_at = (void *)(uintptr_t)m->relro_lo;
  size_t relro_len = m->relro_hi - m->relro_lo;
  if (relro && mprotect(relro_at, relro_len, PROT_READ | PROT_WRITE) != 0) return 0;
  uint32_t written = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t expect = s[i].original;
    if (__atomic_compare_exchange_n(s[i].slot, &expect, s[i].ours, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
      s[written++] = s[i];
  }
  if (relro) mprotect(relro_at, relro_len, PROT_READ);
  return written;
}

static int take_module(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  struct walk *w = arg;
  struct module m;
  if (info->dlpi_addr == w->own_base || !read_module(info, &m) || seen(m.dynamic)) return 0;
  if (visited_count == AS_MAX_MODULES) return 0;
  visited[visited_count++] = m.dynamic;
  uint32_t room = AS_MAX_SLOTS - taken_count, n = 0;
  n += slots_of(&m, m.jmprel, m.jmprel_bytes, w, taken + taken_count, room);
  n += slots_of(&m, m.rela, m.rela_bytes, w, taken + taken_count + n, room - n);
  n = write_slots(&m, taken + taken_count, n);
  taken_count += n;
  w->counts->slots += n;
  if (n) w->counts->modules++;
  return 0;
}

static int count_loads(struct dl_phdr_info *info, size_t size, void *arg) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_subs)) *(unsigned long long *)arg = info->dlpi_adds;
  return 1; /* the first module tells */
}

static uint64_t own_base(void) {
  Dl_info d;
  return dladdr((void *)&own_base, &d) ? (uint64_t)(uintptr_t)d.dli_fbase : 0;
}

/* Whether `p` is a module's PLT entry standing for a function it does not
 * define (a canonical address). */
static int is_plt_entry(void *p) {
  Dl_info info;
  const ElfW(Sym) *sym = NULL;
  return dladdr1(p, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_shndx == SHN_UNDEF;
}

#define AS_MAX_DEFINERS 64
struct definers {
  const char *names[AS_MAX_DEFINERS];
  int n;
  uint64_t own_base;
};

static int list_modules(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  struct definers *d = arg;
  /* the program itself (first, named ""), the vDSO and the library are no definers */
  if (!info->dlpi_name[0] || info->dlpi_name[0] != '/' || info->dlpi_addr == d->own_base) return 0;
  if (d->n < AS_MAX_DEFINERS) d->names[d->n++] = info->dlpi_name;
  return 0;
}

void *as_definition_of(const char *name, void **canonical) {
  void *found = dlsym(RTLD_DEFAULT, name);
  *canonical = found;
  if (!found || !is_plt_entry(found)) return found;
  struct definers d = {.n = 0, .own_base = own_base()};
  dl_iterate_phdr(list_modules, &d);
  for (int i = 0; i < d.n; i++) {
    void *h = dlopen(d.names[i], RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    void *p = dlsym(h, name);
    dlclose(h);
    if (p && !is_plt_entry(p)) return p;
  }
  return NULL;
}

void as_slots_take(const struct as_wrapped_fn *fns, int n, struct as_slot_counts *counts) {
  lock();
  struct walk w = {fns, n, own_base(), counts};
  unsigned long long adds = 0;
  dl_iterate_phdr(count_loads, &adds);
  dl_iterate_phdr(take_module, &w);
  __atomic_store_n(&loads_seen, adds, __ATOMIC_RELEASE);
  unlock();
}

unsigned long long as_module_loads(void) {
  unsigned long long adds = 0;
  dl_iterate_phdr(count_loads, &adds);
  return adds;
}

int as_slots_modules_added(void) {
  return as_module_loads() != __atomic_load_n(&loads_seen, __ATOMIC_ACQUIRE);
}

/* A walk over the loaded modules giving back each one's slots: a module
 * unloaded since is not written. */
static int give_back_module(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  struct module m;
  if (!read_module(info, &m)) return 0;
  uint32_t *given = arg, n = 0;
  struct taken_slot batch[64];
  for (uint32_t i = 0; i < taken_count; i++) {
    if (taken[i].module != m.dynamic) continue;
    /* written back as taken, original and ours swapped */
    batch[n++] = (struct taken_slot){taken[i].slot, taken[i].ours, taken[i].original, m.dynamic};
    if (n == 64) {
      *given += write_slots(&m, batch, n);
      n = 0;
    }
  }
  if (n) *given += write_slots(&m, batch, n);
  return 0;
}

uint32_t as_slots_taken(void) { return __atomic_load_n(&taken_count, __ATOMIC_RELAXED); }

uint32_t as_slots_give_back(void) {
  lock();
  uint32_t given = 0;
  dl_iterate_phdr(give_back_module, &given);
  taken_count = visited_count = 0;
  __atomic_store_n(&loads_seen, 0, __ATOMIC_RELEASE);
  unlock();
  return given;
}
