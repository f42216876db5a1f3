// The trial progress page, live: asks the status endpoint every second and loads the page again
// when the state changes (the server renders every state; without JavaScript the page refreshes
// itself). On the ready page it posts the sign-in form at once.
(() => {
  const form = document.getElementById('sign-in');
  if (form) {
    form.submit();
    return;
  }
  const box = document.querySelector('[data-status-url]');
  if (!box) return;
  const url = box.getAttribute('data-status-url');
  const shown = box.getAttribute('data-state');
  const poll = async () => {
    try {
      const res = await fetch(url, { credentials: 'same-origin', cache: 'no-store' });
      if (res.ok) {
        const { state } = await res.json();
        if (state !== shown) {
          window.location.replace('/saas/trial/progress');
          return;
        }
      }
    } catch {
      // A network hiccup: asked again below.
    }
    setTimeout(poll, 1000);
  };
  setTimeout(poll, 1000);
})();
