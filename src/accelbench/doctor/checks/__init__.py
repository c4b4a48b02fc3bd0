"""The doctor's checks, one module per area. Each takes the gathered facts and returns
`Check`s; none touches the machine."""

from __future__ import annotations

from accelbench.doctor.checks.host import check_hugepages, check_iommu, check_numa, check_problems
from accelbench.doctor.checks.idle import check_idle
from accelbench.doctor.checks.inventory import check_inventory
from accelbench.doctor.checks.kernel import check_kernel_log
from accelbench.doctor.checks.memory import check_memory
from accelbench.doctor.checks.pcie import check_pcie
from accelbench.doctor.checks.stack import check_compat, check_torch, check_versions
from accelbench.doctor.model import Check, Facts


def evaluate(facts: Facts) -> list[Check]:
    checks = check_inventory(facts)
    checks += check_versions(facts)
    checks.append(check_torch(facts))
    checks += check_compat(facts)
    checks.append(check_kernel_log(facts))
    checks.append(check_pcie(facts))
    checks.append(check_memory(facts))
    checks.append(check_idle(facts))
    checks.append(check_iommu(facts))
    checks.append(check_hugepages(facts))
    checks.append(check_numa(facts))
    checks.append(check_problems(facts))
    return checks
