! Fortran `use mpi` (or, built with -DTEMPI_TEST_MPIF_H, `include 'mpif.h'`) on GPU
! buffers (the emulated GPU of the mpi suite), 2 ranks: receives into device arrays
! through strided types, completed by different calls, a persistent receive, a type that
! reuses a freed handle, and a GPU send that a barrier must post. These bindings call
! MPI_X, so TEMPI sees them once its archive is in the program (the link recipes'
! --require-defined: mpif90 puts the MPI libraries after it).
program gpu_buffers_mpi
#ifndef TEMPI_TEST_MPIF_H
  use mpi
#endif
  use gpu_buffers
  implicit none
#ifdef TEMPI_TEST_MPIF_H
  include 'mpif.h'
#endif
  integer :: rank, size, k, ierr, stride2, stride3, reqs(2)
  integer :: st(MPI_STATUS_SIZE)
  logical :: flag
  integer, pointer :: a(:), b(:)
  integer :: host(n), src(20)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  if (size /= 2) stop 'run on 2 ranks'
  call MPI_Type_vector(20, 1, 2, MPI_INTEGER, stride2, ierr)
  call MPI_Type_commit(stride2, ierr)

  src = values(20)
  if (rank == 0) then
    do k = 1, 5
      call MPI_Send(src, 20, MPI_INTEGER, 1, k, MPI_COMM_WORLD, ierr)
    end do
  else
    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 1, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Wait(reqs(1), st, ierr)
    call check_strided('MPI_Wait', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    b => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 2, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Irecv(b, 1, stride2, 0, 3, MPI_COMM_WORLD, reqs(2), ierr)
    call MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE, ierr)
    call check_strided('MPI_Waitall (1)', a, 2, 20)
    call check_strided('MPI_Waitall (2)', b, 2, 20)
    call free_device_array(a)
    call free_device_array(b)

    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride2, 0, 4, MPI_COMM_WORLD, reqs(1), ierr)
    flag = .false.
    do while (.not. flag)
      call MPI_Test(reqs(1), flag, MPI_STATUS_IGNORE, ierr)
    end do
    call check_strided('MPI_Test', a, 2, 20)
    call free_device_array(a)

    a => device_array(sentinel)
    call MPI_Recv_init(a, 1, stride2, 0, 5, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Start(reqs(1), ierr)
    call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
    call check_strided('MPI_Start', a, 2, 20)
    call MPI_Request_free(reqs(1), ierr)
    call free_device_array(a)
  end if

  ! A type freed and another created (MPICH reuses the handle).
  call MPI_Type_free(stride2, ierr)
  call MPI_Type_vector(20, 1, 3, MPI_INTEGER, stride3, ierr)
  call MPI_Type_commit(stride3, ierr)
  if (rank == 0) then
    call MPI_Send(src, 20, MPI_INTEGER, 1, 6, MPI_COMM_WORLD, ierr)
  else
    a => device_array(sentinel)
    call MPI_Irecv(a, 1, stride3, 0, 6, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
    call check_strided('a type that reuses a freed handle', a, 3, 20)
    call free_device_array(a)
  end if

  ! A nonblocking send from the GPU, then a barrier that must post it.
  if (rank == 0) then
    a => device_array(sentinel)
    host = sentinel
    host(1:58:3) = src
    call upload(a, host)
    call MPI_Isend(a, 1, stride3, 1, 7, MPI_COMM_WORLD, reqs(1), ierr)
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
    call MPI_Wait(reqs(1), MPI_STATUS_IGNORE, ierr)
    call free_device_array(a)
  else
    host = sentinel
    call MPI_Recv(host, 20, MPI_INTEGER, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    if (any(host(1:20) /= src)) then
      print *, 'FAIL: MPI_Isend from the GPU then MPI_Barrier', host(1:4)
      failures = failures + 1
    end if
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
  end if

  call MPI_Type_free(stride3, ierr)
  call MPI_Finalize(ierr)
  if (failures > 0) error stop 1
#ifdef TEMPI_TEST_MPIF_H
  if (rank == 1) print '(a)', 'PASS: mpif.h on GPU buffers'
#else
  if (rank == 1) print '(a)', 'PASS: use mpi on GPU buffers'
#endif
end program
