// The page a sealed server answers at /ui: where the unseal stands, from
// GET /sys/seal-status (what any caller may read: sealed, shares given, shares needed).
// Once the server is unsealed, the console opens in its place.
const $ = (id) => document.getElementById(id);

async function check() {
  let status;
  try {
    const response = await fetch("/sys/seal-status", { cache: "no-store", credentials: "omit" });
    status = await response.json(); // {success, message, sealed, progress, threshold}
  } catch {
    $("progress").textContent = "The service cannot be reached.";
    return;
  }
  if (status && status.sealed === false) {
    location.reload(); // unsealed: the console answers here now
    return;
  }
  if (status && Number.isInteger(status.threshold)) {
    $("progress").textContent = `${status.progress} of ${status.threshold} shares given so far.`;
  }
}

$("here").textContent = location.origin;
$("again").addEventListener("click", check);
check();
